//! Label and field selectors (`labelSelector=`, `fieldSelector=`), parsed and matched as the
//! API server does (`k8s.io/apimachinery/pkg/labels`, `.../fields`).

use serde_json::Value;

use podvisor_api::validation::{go_quote, is_qualified_name, is_valid_label_value};

use crate::db::Resource;
use crate::status::{ApiError, ApiResult};

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<LabelReq>);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn label_error(req: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: {why}: {}",
        podvisor_api::validation::go_quote(req.trim())
    ))
}

fn parse_set(req: &str, rest: &str) -> ApiResult<Vec<String>> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| label_error(req, "found '(' expected"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

fn check_key(req: &str, key: &str) -> ApiResult<String> {
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(label_error(req, "invalid label key"));
    }
    // As `labels.NewRequirement`: the key must be a qualified name.
    let errs = is_qualified_name(key);
    if !errs.is_empty() {
        return Err(requirement_error(&format!(
            "key: Invalid value: {}: {}",
            go_quote(key),
            errs.join("; ")
        )));
    }
    Ok(key.to_owned())
}

/// Every value must be a label value (`labels.NewRequirement`'s `values[i][key]` errors).
fn check_values(key: &str, values: &[String]) -> ApiResult<()> {
    let errs: Vec<String> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let errs = is_valid_label_value(v);
            (!errs.is_empty()).then(|| {
                format!(
                    "values[{i}][{key}]: Invalid value: {}: {}",
                    go_quote(v),
                    errs.join("; ")
                )
            })
        })
        .collect();
    match errs.as_slice() {
        [] => Ok(()),
        [one] => Err(requirement_error(one)),
        many => Err(requirement_error(&format!("[{}]", many.join(", ")))),
    }
}

fn requirement_error(why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {why}"))
}

impl LabelSelector {
    /// Parses a selector; 400 on syntax errors.
    pub(crate) fn parse(s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                return Err(label_error(&part, "found '', expected: identifier"));
            }
            if let Some(k) = p.strip_prefix('!') {
                reqs.push(LabelReq::NotExists(check_key(p, k)?));
            } else if let Some((k, v)) = p.split_once("!=") {
                reqs.push(LabelReq::NotIn(check_key(p, k)?, vec![v.trim().to_owned()]));
            } else if let Some((k, v)) = p.split_once("==") {
                reqs.push(LabelReq::In(check_key(p, k)?, vec![v.trim().to_owned()]));
            } else if let Some((k, v)) = p.split_once('=') {
                reqs.push(LabelReq::In(check_key(p, k)?, vec![v.trim().to_owned()]));
            } else if let Some((k, v)) = p.split_once('>') {
                let n = v
                    .trim()
                    .parse()
                    .map_err(|_| label_error(p, "invalid number"))?;
                reqs.push(LabelReq::Gt(check_key(p, k)?, n));
            } else if let Some((k, v)) = p.split_once('<') {
                let n = v
                    .trim()
                    .parse()
                    .map_err(|_| label_error(p, "invalid number"))?;
                reqs.push(LabelReq::Lt(check_key(p, k)?, n));
            } else if let Some(i) = p.find(" notin ").or_else(|| p.find(" notin(")) {
                reqs.push(LabelReq::NotIn(
                    check_key(p, &p[..i])?,
                    parse_set(p, &p[i + 6..])?,
                ));
            } else if let Some(i) = p.find(" in ").or_else(|| p.find(" in(")) {
                reqs.push(LabelReq::In(
                    check_key(p, &p[..i])?,
                    parse_set(p, &p[i + 3..])?,
                ));
            } else {
                reqs.push(LabelReq::Exists(check_key(p, p)?));
            }
        }
        for r in &reqs {
            match r {
                LabelReq::In(k, vs) | LabelReq::NotIn(k, vs) => check_values(k, vs)?,
                LabelReq::Exists(_)
                | LabelReq::NotExists(_)
                | LabelReq::Gt(..)
                | LabelReq::Lt(..) => {}
            }
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's labels satisfy every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let empty = serde_json::Map::new();
        let labels = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }
}

/// One field requirement: `field=value` or `field!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldReq {
    field: String,
    value: String,
    equal: bool,
}

/// A parsed `fieldSelector` for one resource; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<FieldReq>);

/// The field labels a resource supports, and how to read them from an object.
fn field_value(res: Resource, obj: &Value, field: &str) -> Option<Option<String>> {
    let s = |ptr: &str| -> Option<String> {
        match obj.pointer(ptr) {
            Some(Value::String(v)) => Some(v.clone()),
            Some(Value::Bool(b)) => Some(b.to_string()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => Some(String::new()),
        }
    };
    let common = match field {
        "metadata.name" => Some(s("/metadata/name")),
        "metadata.namespace" => Some(s("/metadata/namespace")),
        _ => None,
    };
    if common.is_some() {
        return common;
    }
    let v = match (res.kind, field) {
        ("Pod", "spec.nodeName") => s("/spec/nodeName"),
        ("Pod", "spec.restartPolicy") => s("/spec/restartPolicy"),
        ("Pod", "spec.schedulerName") => s("/spec/schedulerName"),
        ("Pod", "spec.serviceAccountName") => s("/spec/serviceAccountName"),
        ("Pod", "spec.hostNetwork") => match obj.pointer("/spec/hostNetwork") {
            Some(Value::Bool(true)) => Some("true".to_owned()),
            _ => Some("false".to_owned()),
        },
        ("Pod", "status.phase") => s("/status/phase"),
        ("Pod", "status.podIP") => s("/status/podIP"),
        ("Pod", "status.nominatedNodeName") => s("/status/nominatedNodeName"),
        ("Event", f) => match f {
            "involvedObject.kind" => s("/involvedObject/kind"),
            "involvedObject.namespace" => s("/involvedObject/namespace"),
            "involvedObject.name" => s("/involvedObject/name"),
            "involvedObject.uid" => s("/involvedObject/uid"),
            "involvedObject.apiVersion" => s("/involvedObject/apiVersion"),
            "involvedObject.resourceVersion" => s("/involvedObject/resourceVersion"),
            "involvedObject.fieldPath" => s("/involvedObject/fieldPath"),
            "reason" => s("/reason"),
            "reportingComponent" => s("/reportingComponent"),
            "source" => s("/source/component"),
            "type" => s("/type"),
            _ => return None,
        },
        ("Namespace", "status.phase") => s("/status/phase"),
        ("Secret", "type") => s("/type"),
        ("Node", "spec.unschedulable") => match obj.pointer("/spec/unschedulable") {
            Some(Value::Bool(true)) => Some("true".to_owned()),
            _ => Some("false".to_owned()),
        },
        _ => return None,
    };
    Some(v)
}

impl FieldSelector {
    /// Parses a selector for `res`; 400 on syntax errors and unsupported fields.
    pub(crate) fn parse(res: Resource, s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for part in s.split(',') {
            let (field, value, equal) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field_value(res, &Value::Null, field).is_none() {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            reqs.push(FieldReq {
                field: field.to_owned(),
                value: value.trim().to_owned(),
                equal,
            });
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether an object satisfies every requirement.
    pub(crate) fn matches(&self, res: Resource, obj: &Value) -> bool {
        self.0.iter().all(|r| {
            let v = field_value(res, obj, &r.field)
                .flatten()
                .unwrap_or_default();
            (v == r.value) == r.equal
        })
    }

    /// Adds `metadata.name=<name>` (watching one object by URL).
    pub(crate) fn pin_name(&mut self, name: &str) {
        self.0.push(FieldReq {
            field: "metadata.name".to_owned(),
            value: name.to_owned(),
            equal: true,
        });
    }
}

/// Both selectors of a request, for one resource.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    /// The resource the selectors apply to.
    pub res: Option<Resource>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

impl Selection {
    /// Parses both selectors.
    pub(crate) fn parse(
        res: Resource,
        labels: Option<&str>,
        fields: Option<&str>,
    ) -> ApiResult<Self> {
        Ok(Selection {
            res: Some(res),
            labels: LabelSelector::parse(labels.unwrap_or(""))?,
            fields: FieldSelector::parse(res, fields.unwrap_or(""))?,
        })
    }

    /// Whether every object is selected (no selector, or empty ones).
    pub(crate) fn selects_all(&self) -> bool {
        self.res.is_none() || (self.labels.0.is_empty() && self.fields.0.is_empty())
    }

    /// Whether an object is selected.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let Some(res) = self.res else { return true };
        self.labels.matches(obj) && self.fields.matches(res, obj)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::db::{EVENTS, PODS};

    fn pod(labels: Value, phase: &str) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "labels": labels},
               "spec": {"nodeName": "n1"}, "status": {"phase": phase}})
    }

    #[test]
    fn label_selector_grammar() {
        let p = pod(json!({"app": "web", "tier": "front"}), "Running");
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "missing!=x",
            "app in (web, db)",
            "tier notin (back)",
            "app",
            "!missing",
            "app=web,tier in (front)",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&p), "{s}");
        }
        let no = [
            "app=db",
            "app!=web",
            "app in (db)",
            "app notin (web)",
            "!app",
            "missing",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&p), "{s}");
        }
    }

    #[test]
    fn field_selector_fields() {
        let p = pod(json!({}), "Running");
        let sel = FieldSelector::parse(PODS, "metadata.name=web,status.phase!=Failed").unwrap();
        assert!(sel.matches(PODS, &p));
        let sel = FieldSelector::parse(PODS, "spec.nodeName==n2").unwrap();
        assert!(!sel.matches(PODS, &p));
        assert_eq!(
            FieldSelector::parse(PODS, "spec.foo=x")
                .unwrap_err()
                .message,
            "field label not supported: spec.foo"
        );
        assert!(
            FieldSelector::parse(EVENTS, "involvedObject.uid=u,reason=Started,type=Normal").is_ok()
        );
    }
}
