//! The line of a field of a YAML document, for errors that name a field by its path
//! (`spec.containers[0].command[0]`): the document is read again as a tree of keys and
//! items, each with the place serde-saphyr saw it (`Spanned`), and the path is walked.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::PathSegment;

/// A YAML node reduced to its shape: keys and items keep where they are.
enum Node {
    Map(Vec<(String, Spanned<Node>)>),
    Seq(Vec<Spanned<Node>>),
    Leaf,
}

/// The 1-based line (in `chunk`) of the deepest node of `path` that exists in the YAML
/// document `chunk`, or `None` when the text does not parse or the path's first step is
/// missing.
pub(super) fn line_of(chunk: &str, path: &[PathSegment]) -> Option<u64> {
    let root: Spanned<Node> = serde_saphyr::from_str(chunk).ok()?;
    let mut here = &root;
    let mut line = None;
    for segment in path {
        let next = match (&here.value, segment) {
            (Node::Map(entries), PathSegment::Key(key)) => {
                entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
            }
            (Node::Seq(items), PathSegment::Index(i)) => items.get(*i),
            _ => None,
        };
        let Some(next) = next else { break };
        line = Some(next.referenced.line());
        here = next;
    }
    line
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(Key(key)) = map.next_key()? {
            entries.push((key, map.next_value()?));
        }
        Ok(Node::Map(entries))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }

    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
}

/// A map key as text, whatever scalar it is.
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
                Ok(Key("null".to_owned()))
            }
        }
        d.deserialize_any(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Vec<PathSegment> {
        super::super::parse_path(text)
    }

    #[test]
    fn finds_the_line_of_a_nested_item() {
        let doc = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  \
                   - name: a\n    image: b\n  - name: c\n    image: d\n    command: [sh, true]\n";
        assert_eq!(
            line_of(doc, &path("spec.containers[1].command[1]")),
            Some(11)
        );
        assert_eq!(line_of(doc, &path("spec.containers[1].image")), Some(10));
        // A missing tail: the deepest node that exists.
        assert_eq!(line_of(doc, &path("spec.containers[1].nope")), Some(9));
        assert_eq!(line_of(doc, &path("nope")), None);
    }
}
