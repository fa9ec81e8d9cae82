//! A protobuf `Pod` (what `kubectl debug --copy-to` posts) decoded into the JSON the handlers
//! take, through the Pod's wire schema (`pod.schema`, written by `scripts/pod-proto-schema`
//! from k8s.io/api and k8s.io/apimachinery): each message's field numbers, wire types, JSON
//! names, which embedded structs are inlined in JSON, and which zero values JSON omits (Go
//! marshals every non-pointer scalar, JSON drops it with `omitempty`). A field the schema does
//! not know is an error, never dropped: the client sent something this server would lose.

use std::collections::HashMap;
use std::sync::OnceLock;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::{Field, fields, text};

/// The schemas' text: the Pod's, and RBAC's kinds (which reuse its `ObjectMeta` and
/// `LabelSelector`).
const SCHEMA: [&str; 2] = [include_str!("pod.schema"), include_str!("rbac.schema")];

/// How a field repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    One,
    Repeated,
    Map,
}

/// One field of a message.
#[derive(Debug)]
struct FieldDef {
    number: u64,
    /// `None`: an embedded struct whose fields JSON inlines.
    json: Option<&'static str>,
    kind: Kind,
    /// The type; for a map, its value type (keys are strings).
    ty: &'static str,
    /// JSON omits its zero value.
    omit_zero: bool,
}

fn schema() -> &'static HashMap<&'static str, Vec<FieldDef>> {
    static PARSED: OnceLock<HashMap<&'static str, Vec<FieldDef>>> = OnceLock::new();
    PARSED.get_or_init(|| {
        let mut messages: HashMap<&'static str, Vec<FieldDef>> = HashMap::new();
        let mut current = "";
        for line in SCHEMA.iter().flat_map(|text| text.lines()) {
            let parts: Vec<&'static str> = line.split_whitespace().collect();
            match parts.as_slice() {
                ["M", name] => {
                    current = name;
                    messages.entry(name).or_default();
                }
                ["F", number, name, kind, ty, zero] => {
                    let kind = match *kind {
                        "rep" => Kind::Repeated,
                        "map" => Kind::Map,
                        _ => Kind::One,
                    };
                    let ty = match kind {
                        Kind::Map => ty.split(',').nth(1).unwrap_or(ty),
                        _ => ty,
                    };
                    messages.entry(current).or_default().push(FieldDef {
                        number: number.parse().unwrap_or(0),
                        json: (*name != "-").then_some(*name),
                        kind,
                        ty,
                        omit_zero: *zero == "z",
                    });
                }
                _ => {}
            }
        }
        messages
    })
}

/// A message of type `name` with a schema (the envelope's `raw`: a Pod, or one of RBAC's
/// kinds) as a JSON object, without `apiVersion` and `kind`.
pub(super) fn decode(raw: &[u8], name: &str) -> Result<Map<String, Value>, String> {
    message(raw, name)
}

fn message(buf: &[u8], name: &str) -> Result<Map<String, Value>, String> {
    let defs = schema()
        .get(name)
        .ok_or_else(|| format!("no protobuf schema for {name}"))?;
    let mut out = Map::new();
    for (number, field) in fields(buf)? {
        let def = defs
            .iter()
            .find(|d| d.number == number)
            .ok_or_else(|| format!("field {number} of {name} is not known to this server"))?;
        match def.kind {
            Kind::One => {
                let v = value(&field, def.ty)?;
                match def.json {
                    None => {
                        if let Value::Object(inner) = v {
                            out.extend(inner);
                        }
                    }
                    Some(_) if v.is_null() => {}
                    Some(_) if def.omit_zero && is_zero(&v) => {}
                    Some(key) => {
                        out.insert(key.to_owned(), v);
                    }
                }
            }
            Kind::Repeated => {
                let key = def.json.unwrap_or(name);
                let list = out
                    .entry(key.to_owned())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = list {
                    items.extend(repeated(&field, def.ty)?);
                }
            }
            Kind::Map => {
                let Field::Bytes(entry) = field else {
                    return Err(format!("field {number} of {name}: a map entry expected"));
                };
                let (mut k, mut v) = (String::new(), Value::Null);
                for (n, f) in fields(entry)? {
                    match n {
                        1 => k = string(&f)?,
                        2 => v = value(&f, def.ty)?,
                        _ => {}
                    }
                }
                if v.is_null() {
                    v = zero_of(def.ty);
                }
                let key = def.json.unwrap_or(name);
                let map = out
                    .entry(key.to_owned())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(m) = map {
                    m.insert(k, v);
                }
            }
        }
    }
    Ok(out)
}

/// A repeated field's items: one per occurrence, or packed varints.
fn repeated(field: &Field<'_>, ty: &str) -> Result<Vec<Value>, String> {
    match (field, ty) {
        (Field::Bytes(packed), "int32" | "int64" | "bool") => {
            let mut items = Vec::new();
            let mut pos = 0;
            while pos < packed.len() {
                let v = super::varint(packed, &mut pos)?;
                items.push(value(&Field::Varint(v), ty)?);
            }
            Ok(items)
        }
        _ => Ok(vec![value(field, ty)?]),
    }
}

fn string(field: &Field<'_>) -> Result<String, String> {
    match field {
        Field::Bytes(b) => text(b),
        _ => Err("a string expected".to_owned()),
    }
}

/// Go's two's-complement `int32`/`int64` out of a varint.
#[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
fn signed(v: u64, ty: &str) -> i64 {
    if ty == "int32" {
        i64::from(v as i32)
    } else {
        v as i64
    }
}

fn value(field: &Field<'_>, ty: &str) -> Result<Value, String> {
    match (ty, field) {
        ("string", f) => Ok(json!(string(f)?)),
        ("int32" | "int64", Field::Varint(v)) => Ok(json!(signed(*v, ty))),
        ("bool", Field::Varint(v)) => Ok(json!(*v != 0)),
        ("bytes", Field::Bytes(b)) => {
            Ok(json!(base64::engine::general_purpose::STANDARD.encode(b)))
        }
        ("Quantity", Field::Bytes(b)) => {
            let mut q = String::new();
            for (n, f) in fields(b)? {
                if n == 1 {
                    q = string(&f)?;
                }
            }
            Ok(json!(q))
        }
        ("IntOrString", Field::Bytes(b)) => {
            let (mut kind, mut int, mut text) = (0, 0, String::new());
            for (n, f) in fields(b)? {
                match (n, f) {
                    (1, Field::Varint(v)) => kind = v,
                    (2, Field::Varint(v)) => int = signed(v, "int32"),
                    (3, f) => text = string(&f)?,
                    _ => {}
                }
            }
            Ok(if kind == 1 { json!(text) } else { json!(int) })
        }
        ("Time" | "MicroTime", Field::Bytes(b)) => time(b, ty == "MicroTime"),
        ("FieldsV1", Field::Bytes(b)) => {
            let mut raw = Value::Object(Map::new());
            for (n, f) in fields(b)? {
                if let (1, Field::Bytes(x)) = (n, f) {
                    raw = serde_json::from_slice(x).map_err(|e| e.to_string())?;
                }
            }
            Ok(raw)
        }
        (message_type, Field::Bytes(b)) if schema().contains_key(message_type) => {
            Ok(Value::Object(message(b, message_type)?))
        }
        (ty, _) => Err(format!("a {ty} of an unexpected wire type")),
    }
}

/// `metav1.Time` (whole seconds) or `MicroTime` as RFC 3339; Go's zero time is null.
fn time(b: &[u8], micro: bool) -> Result<Value, String> {
    const GO_ZERO: i64 = -62_135_596_800;
    let (mut seconds, mut nanos) = (0i64, 0i64);
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(v)) => seconds = signed(v, "int64"),
            (2, Field::Varint(v)) => nanos = signed(v, "int32"),
            _ => {}
        }
    }
    if seconds == GO_ZERO && nanos == 0 {
        return Ok(Value::Null);
    }
    let ts = jiff::Timestamp::new(
        seconds,
        if micro {
            (nanos / 1000 * 1000) as i32
        } else {
            0
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(json!(if micro {
        ts.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
    } else {
        ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }))
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    }
}

fn zero_of(ty: &str) -> Value {
    match ty {
        "string" | "Quantity" => json!(""),
        "int32" | "int64" => json!(0),
        "bool" => json!(false),
        _ => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(mut x: u64, out: &mut Vec<u8>) {
        loop {
            let byte = u8::try_from(x & 0x7f).unwrap();
            x >>= 7;
            if x == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// A length-delimited field.
    fn bytes(n: u64, b: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode((n << 3) | 2, &mut v);
        encode(b.len() as u64, &mut v);
        v.extend_from_slice(b);
        v
    }

    fn varint(n: u64, value: u64) -> Vec<u8> {
        let mut v = Vec::new();
        encode(n << 3, &mut v);
        encode(value, &mut v);
        v
    }

    /// Field numbers as k8s.io/api's generated.proto has them: a container with a command,
    /// a port, a quantity, an int-or-string probe port and an inlined probe handler; zero
    /// scalars of non-pointer fields are dropped, `stdin: false` among them, a pointer field's
    /// zero (`runAsUser: 0`) is kept.
    #[test]
    fn a_pod_decodes_as_json() {
        let port = [varint(3, 8080), bytes(4, b"TCP")].concat();
        let limits = bytes(
            1,
            &[bytes(1, b"cpu"), bytes(2, &bytes(1, b"500m"))].concat(),
        );
        let http = [
            bytes(1, b"/healthz"),
            bytes(2, &[varint(1, 0), varint(2, 8080)].concat()),
        ]
        .concat();
        let probe = [bytes(1, &bytes(2, &http)), varint(4, 3)].concat();
        let security = varint(4, 0);
        let container = [
            bytes(1, b"app"),
            bytes(2, b"busybox"),
            bytes(3, b"sleep"),
            bytes(3, b"1000"),
            bytes(5, b""),
            bytes(6, &port),
            bytes(8, &limits),
            bytes(10, &probe),
            bytes(15, &security),
            varint(16, 0),
        ]
        .concat();
        let spec = [bytes(2, &container), bytes(3, b"Never"), varint(4, 0)].concat();
        let meta = [
            bytes(1, b"copy"),
            bytes(11, &[bytes(1, b"a"), bytes(2, b"b")].concat()),
            bytes(8, &[varint(1, 1_767_225_600)].concat()),
        ]
        .concat();
        let pod = [bytes(1, &meta), bytes(2, &spec)].concat();
        let got = Value::Object(decode(&pod, "Pod").unwrap());
        assert_eq!(
            got,
            json!({
                "metadata": {"name": "copy", "labels": {"a": "b"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {
                    "containers": [{
                        "name": "app",
                        "image": "busybox",
                        "command": ["sleep", "1000"],
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m"}},
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 3},
                        "securityContext": {"runAsUser": 0},
                    }],
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                },
            })
        );
    }

    /// A field the schema does not know is refused, not dropped.
    #[test]
    fn an_unknown_field_is_an_error() {
        let pod = [bytes(2, &bytes(999, b"x"))].concat();
        assert_eq!(
            decode(&pod, "Pod").unwrap_err(),
            "field 999 of PodSpec is not known to this server"
        );
    }

    /// A RoleBinding as `kubectl create rolebinding` sends it: a subject whose empty
    /// `namespace` is omitted, and the `roleRef`.
    #[test]
    fn a_role_binding_decodes_as_json() {
        let binding = [
            bytes(1, &bytes(1, b"b")),
            bytes(
                2,
                &[
                    bytes(1, b"User"),
                    bytes(2, b"rbac.authorization.k8s.io"),
                    bytes(3, b"alice"),
                    bytes(4, b""),
                ]
                .concat(),
            ),
            bytes(
                3,
                &[
                    bytes(1, b"rbac.authorization.k8s.io"),
                    bytes(2, b"ClusterRole"),
                    bytes(3, b"view"),
                ]
                .concat(),
            ),
        ]
        .concat();
        assert_eq!(
            Value::Object(decode(&binding, "RoleBinding").unwrap()),
            json!({
                "metadata": {"name": "b"},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
            })
        );
    }
}
