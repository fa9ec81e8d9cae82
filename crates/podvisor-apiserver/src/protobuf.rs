//! Just enough of the Kubernetes protobuf encoding to accept what kubectl's typed clients
//! send that way (they do not fall back to JSON on 415): `kubectl create namespace` posts a
//! protobuf `Namespace`, `kubectl create configmap|secret` a `ConfigMap` or `Secret`, `kubectl
//! debug --copy-to` a `Pod`, `kubectl create role|clusterrole|rolebinding|clusterrolebinding`
//! RBAC's kinds, `kubectl auth can-i|whoami` their reviews. The envelope (`k8s\0` + `runtime.Unknown`) is decoded; of a
//! Namespace its `ObjectMeta` name, generateName, labels and annotations; of a ConfigMap or
//! Secret also their data, binary data, string data, type and `immutable`; a Pod and RBAC's
//! kinds whole, through their wire schemas (`protobuf/pod.rs`); every other kind is refused
//! with 415.

use serde_json::{Map, Value, json};

mod pod;

/// The envelope's magic prefix.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

/// One field of a protobuf message.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".to_owned())
}

/// The fields of a message, in order.
fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (number, wire) = (key >> 3, key & 7);
        let field = match wire {
            0 => Field::Varint(varint(buf, &mut pos)?),
            1 => {
                pos += 8;
                Field::Other
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).map_err(|e| e.to_string())?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or("truncated field")?;
                let bytes = &buf[pos..end];
                pos = end;
                Field::Bytes(bytes)
            }
            5 => {
                pos += 4;
                Field::Other
            }
            w => return Err(format!("unsupported wire type {w}")),
        };
        out.push((number, field));
    }
    if pos > buf.len() {
        return Err("truncated message".to_owned());
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
}

/// A `map<string, string>` entry.
fn entry(b: &[u8]) -> Result<(String, String), String> {
    let (k, v) = bytes_entry(b)?;
    Ok((k, text(&v)?))
}

/// A `map<string, bytes>` entry.
fn bytes_entry(b: &[u8]) -> Result<(String, Vec<u8>), String> {
    let (mut k, mut v) = (String::new(), Vec::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => k = text(x)?,
            (2, Field::Bytes(x)) => v = x.to_vec(),
            _ => {}
        }
    }
    Ok((k, v))
}

/// The JSON of a ConfigMap's or Secret's own fields (`generated.proto` numbers).
/// A TokenRequest (what `kubectl create token` sends): its spec's `audiences` (1),
/// `boundObjectRef` (3: kind, apiVersion, name, uid) and `expirationSeconds` (4).
fn token_request(raw: &[u8]) -> Result<Value, String> {
    let mut spec = Map::new();
    for (n, f) in fields(raw)? {
        let (2, Field::Bytes(x)) = (n, f) else {
            continue;
        };
        let mut audiences = Vec::new();
        for (n, f) in fields(x)? {
            match (n, f) {
                (1, Field::Bytes(a)) => audiences.push(json!(text(a)?)),
                (3, Field::Bytes(r)) => {
                    let mut bound = Map::new();
                    for (n, f) in fields(r)? {
                        let key = match n {
                            1 => "kind",
                            2 => "apiVersion",
                            3 => "name",
                            4 => "uid",
                            _ => continue,
                        };
                        if let Field::Bytes(v) = f {
                            bound.insert(key.to_owned(), json!(text(v)?));
                        }
                    }
                    spec.insert("boundObjectRef".to_owned(), Value::Object(bound));
                }
                (4, Field::Varint(v)) => {
                    // int64 on the wire: two's complement in 64 bits.
                    spec.insert(
                        "expirationSeconds".to_owned(),
                        json!(i64::from_ne_bytes(v.to_ne_bytes())),
                    );
                }
                _ => {}
            }
        }
        spec.insert("audiences".to_owned(), json!(audiences));
    }
    Ok(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": spec,
    }))
}

/// A ServiceAccount's fields besides its metadata: `imagePullSecrets` (3) and
/// `automountServiceAccountToken` (4); `secrets` (2) keeps the names it references.
fn service_account_fields(raw: &[u8], out: &mut Map<String, Value>) -> Result<(), String> {
    let name_of = |x: &[u8], field: u64| -> Result<Value, String> {
        let mut name = String::new();
        for (n, f) in fields(x)? {
            if let (true, Field::Bytes(v)) = (n == field, f) {
                name = text(v)?;
            }
        }
        Ok(json!({"name": name}))
    };
    let (mut secrets, mut pull) = (Vec::new(), Vec::new());
    for (n, f) in fields(raw)? {
        match (n, f) {
            (2, Field::Bytes(x)) => secrets.push(name_of(x, 3)?),
            (3, Field::Bytes(x)) => pull.push(name_of(x, 1)?),
            (4, Field::Varint(v)) => {
                out.insert("automountServiceAccountToken".to_owned(), json!(v != 0));
            }
            _ => {}
        }
    }
    if !secrets.is_empty() {
        out.insert("secrets".to_owned(), json!(secrets));
    }
    if !pull.is_empty() {
        out.insert("imagePullSecrets".to_owned(), json!(pull));
    }
    Ok(())
}

fn config_fields(kind: &str, raw: &[u8], out: &mut Map<String, Value>) -> Result<(), String> {
    use base64::Engine as _;
    let b64 = |v: &[u8]| json!(base64::engine::general_purpose::STANDARD.encode(v));
    let mut maps: [Map<String, Value>; 3] = Default::default();
    let secret = kind == "Secret";
    for (n, f) in fields(raw)? {
        match (secret, n, f) {
            (false, 2, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                maps[0].insert(k, json!(v));
            }
            (false, 3, Field::Bytes(x)) => {
                let (k, v) = bytes_entry(x)?;
                maps[1].insert(k, b64(&v));
            }
            (false, 4, Field::Varint(v)) | (true, 5, Field::Varint(v)) => {
                out.insert("immutable".to_owned(), json!(v != 0));
            }
            (true, 2, Field::Bytes(x)) => {
                let (k, v) = bytes_entry(x)?;
                maps[0].insert(k, b64(&v));
            }
            (true, 3, Field::Bytes(x)) => {
                out.insert("type".to_owned(), json!(text(x)?));
            }
            (true, 4, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                maps[2].insert(k, json!(v));
            }
            _ => {}
        }
    }
    let names = if secret {
        ["data", "", "stringData"]
    } else {
        ["data", "binaryData", ""]
    };
    for (name, map) in names.into_iter().zip(maps) {
        if !map.is_empty() {
            out.insert(name.to_owned(), Value::Object(map));
        }
    }
    Ok(())
}

fn object_meta(b: &[u8]) -> Result<Value, String> {
    let mut meta = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            // Go marshals these strings even when empty; JSON omits them (`omitempty`), so
            // an empty one is left out (no `generateName: ""` on what kubectl creates).
            (1..=3, Field::Bytes(x)) if !x.is_empty() => {
                let key = match n {
                    1 => "name",
                    2 => "generateName",
                    _ => "namespace",
                };
                meta.insert(key.to_owned(), json!(text(x)?));
            }
            (11, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                labels.insert(k, json!(v));
            }
            (12, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                annotations.insert(k, json!(v));
            }
            _ => {}
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".to_owned(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".to_owned(), Value::Object(annotations));
    }
    Ok(Value::Object(meta))
}

/// The string fields of a message, by number, as JSON.
fn strings(b: &[u8], names: &[(u64, &str)]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (n, f) in fields(b)? {
        if let (Some((_, name)), Field::Bytes(x)) = (names.iter().find(|(m, _)| *m == n), f) {
            out.insert((*name).to_owned(), json!(text(x)?));
        }
    }
    Ok(out)
}

/// The review kinds kubectl's `auth` commands post (`authorization.k8s.io/v1` and
/// `authentication.k8s.io/v1` `generated.proto`): their metadata and spec.
fn review(api_version: &str, kind: &str, raw: &[u8]) -> Result<Option<Value>, String> {
    let spec_of = |b: &[u8]| -> Result<Value, String> {
        let mut spec = Map::new();
        match kind {
            "SelfSubjectAccessReview" => {
                for (n, f) in fields(b)? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => {
                            let attrs = strings(
                                x,
                                &[
                                    (1, "namespace"),
                                    (2, "verb"),
                                    (3, "group"),
                                    (4, "version"),
                                    (5, "resource"),
                                    (6, "subresource"),
                                    (7, "name"),
                                ],
                            )?;
                            spec.insert("resourceAttributes".to_owned(), Value::Object(attrs));
                        }
                        (2, Field::Bytes(x)) => {
                            let attrs = strings(x, &[(1, "path"), (2, "verb")])?;
                            spec.insert("nonResourceAttributes".to_owned(), Value::Object(attrs));
                        }
                        _ => {}
                    }
                }
            }
            _ => spec = strings(b, &[(1, "namespace")])?,
        }
        Ok(Value::Object(spec))
    };
    let known = matches!(
        (api_version, kind),
        (
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview" | "SelfSubjectRulesReview"
        ) | ("authentication.k8s.io/v1", "SelfSubjectReview")
    );
    if !known {
        return Ok(None);
    }
    let mut out = Map::new();
    out.insert("apiVersion".to_owned(), json!(api_version));
    out.insert("kind".to_owned(), json!(kind));
    out.insert("metadata".to_owned(), json!({}));
    for (n, f) in fields(raw)? {
        match (n, f) {
            (1, Field::Bytes(x)) => {
                out.insert("metadata".to_owned(), object_meta(x)?);
            }
            (2, Field::Bytes(x)) if kind != "SelfSubjectReview" => {
                out.insert("spec".to_owned(), spec_of(x)?);
            }
            _ => {}
        }
    }
    Ok(Some(Value::Object(out)))
}

/// A protobuf `DeleteOptions` body (typed clients such as helm's send one with a delete) as
/// its JSON: `gracePeriodSeconds` (1), `preconditions` (2: `uid` 1, `resourceVersion` 2),
/// `orphanDependents` (3), `propagationPolicy` (4), `dryRun` (5).
pub(crate) fn delete_options(body: &[u8]) -> Result<Value, String> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or("missing the k8s protobuf prefix")?;
    let mut raw = &[][..];
    for (n, f) in fields(envelope)? {
        if let (2, Field::Bytes(x)) = (n, f) {
            raw = x;
        }
    }
    let mut out = Map::new();
    let mut dry_run = Vec::new();
    for (n, f) in fields(raw)? {
        match (n, f) {
            (1, Field::Varint(v)) => {
                // int64, two's complement.
                out.insert("gracePeriodSeconds".to_owned(), json!(v.cast_signed()));
            }
            (2, Field::Bytes(x)) => {
                out.insert(
                    "preconditions".to_owned(),
                    Value::Object(strings(x, &[(1, "uid"), (2, "resourceVersion")])?),
                );
            }
            (3, Field::Varint(v)) => {
                out.insert("orphanDependents".to_owned(), json!(v != 0));
            }
            (4, Field::Bytes(x)) => {
                out.insert("propagationPolicy".to_owned(), json!(text(x)?));
            }
            (5, Field::Bytes(x)) => dry_run.push(json!(text(x)?)),
            _ => {}
        }
    }
    if !dry_run.is_empty() {
        out.insert("dryRun".to_owned(), Value::Array(dry_run));
    }
    Ok(Value::Object(out))
}

/// The `metadata.name` of any kind's protobuf body (every kind's message has its
/// `ObjectMeta` as field 1, whose field 1 is the name), for messages about a body that is not
/// decoded further.
pub(crate) fn object_name(body: &[u8]) -> Option<String> {
    let envelope = body.strip_prefix(MAGIC)?;
    let raw = fields(envelope)
        .ok()?
        .into_iter()
        .find_map(|(n, f)| match (n, f) {
            (2, Field::Bytes(x)) => Some(x),
            _ => None,
        })?;
    let meta = fields(raw)
        .ok()?
        .into_iter()
        .find_map(|(n, f)| match (n, f) {
            (1, Field::Bytes(x)) => Some(x),
            _ => None,
        })?;
    fields(meta)
        .ok()?
        .into_iter()
        .find_map(|(n, f)| match (n, f) {
            (1, Field::Bytes(x)) => text(x).ok(),
            _ => None,
        })
}

/// Decodes a protobuf body into the JSON the handlers understand; `Err` with a reason when
/// it is not a Namespace (or not decodable).
pub(crate) fn decode(body: &[u8]) -> Result<Value, String> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or("missing the k8s protobuf prefix")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(envelope)? {
        match (n, f) {
            (1, Field::Bytes(type_meta)) => {
                for (m, g) in fields(type_meta)? {
                    match (m, g) {
                        (1, Field::Bytes(x)) => api_version = text(x)?,
                        (2, Field::Bytes(x)) => kind = text(x)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = x,
            (3, Field::Bytes(enc)) if !enc.is_empty() => {
                return Err("compressed protobuf bodies are not supported".to_owned());
            }
            _ => {}
        }
    }
    let schema_kind = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Pod") => true,
        ("rbac.authorization.k8s.io/v1", k) => {
            matches!(
                k,
                "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"
            )
        }
        _ => false,
    };
    if schema_kind {
        let mut obj = pod::decode(raw, &kind)?;
        obj.insert("apiVersion".to_owned(), json!(api_version));
        obj.insert("kind".to_owned(), json!(kind));
        return Ok(Value::Object(obj));
    }
    if let Some(review) = review(&api_version, &kind, raw)? {
        return Ok(review);
    }
    if api_version == "authentication.k8s.io/v1" && kind == "TokenRequest" {
        return token_request(raw);
    }
    if api_version != "v1"
        || !matches!(
            kind.as_str(),
            "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount"
        )
    {
        return Err(format!(
            "protobuf is only accepted for v1 Namespace, Pod, ConfigMap, Secret and ServiceAccount and RBAC's kinds, not {api_version} {kind}"
        ));
    }
    let mut metadata = json!({});
    for (n, f) in fields(raw)? {
        if let (1, Field::Bytes(x)) = (n, f) {
            metadata = object_meta(x)?;
        }
    }
    let mut out = Map::new();
    out.insert("apiVersion".to_owned(), json!(api_version));
    out.insert("kind".to_owned(), json!(kind));
    out.insert("metadata".to_owned(), metadata);
    if kind == "ServiceAccount" {
        service_account_fields(raw, &mut out)?;
    } else if kind != "Namespace" {
        config_fields(&kind, raw, &mut out)?;
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(n: u8, b: &[u8]) -> Vec<u8> {
        let mut v = vec![(n << 3) | 2, u8::try_from(b.len()).unwrap()];
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn decodes_a_namespace_like_kubectl_sends_it() {
        let type_meta = [bytes_field(1, b"v1"), bytes_field(2, b"Namespace")].concat();
        let label = [bytes_field(1, b"team"), bytes_field(2, b"a")].concat();
        let meta = [bytes_field(1, b"other"), bytes_field(11, &label)].concat();
        let ns = [
            bytes_field(1, &meta),
            bytes_field(2, b""),
            bytes_field(3, b""),
        ]
        .concat();
        let body = [
            MAGIC.to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, &ns),
            bytes_field(3, b""),
            bytes_field(4, b""),
        ]
        .concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "other", "labels": {"team": "a"}}})
        );
        let service = [
            MAGIC.to_vec(),
            bytes_field(
                1,
                &[bytes_field(1, b"v1"), bytes_field(2, b"Service")].concat(),
            ),
        ]
        .concat();
        assert_eq!(
            decode(&service).unwrap_err(),
            "protobuf is only accepted for v1 Namespace, Pod, ConfigMap, Secret and ServiceAccount and RBAC's kinds, not v1 Service"
        );
        let pod = [
            MAGIC.to_vec(),
            bytes_field(1, &[bytes_field(1, b"v1"), bytes_field(2, b"Pod")].concat()),
        ]
        .concat();
        assert_eq!(
            decode(&pod).unwrap(),
            json!({"apiVersion": "v1", "kind": "Pod"})
        );
    }
}
