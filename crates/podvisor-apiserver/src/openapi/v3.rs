//! `/openapi/v3`'s document of one group-version.

use serde_json::{Map, Value, json};

use super::{FORCE_PARAM, PATCH_TYPES, ServedKind, WRITE_PARAMS, definitions};

fn query_param((name, description): (&str, &str)) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": "string", "uniqueItems": true}
    })
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn responses(name: &str, codes: &[(&str, &str)]) -> Value {
    let content = json!({"application/json": {"schema": schema_ref(name)}});
    codes
        .iter()
        .map(|(code, text)| {
            (
                (*code).to_owned(),
                json!({"description": text, "content": content}),
            )
        })
        .collect::<Map<String, Value>>()
        .into()
}

fn operation(k: &ServedKind, name: &str, verb: &str, action: &str) -> Value {
    json!({
        "tags": [k.tag()],
        "operationId": k.operation_id(verb),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": k.gvk(),
        "responses": responses(name, &[("200", "OK")]),
    })
}

/// The OpenAPI 3.0 document of the kinds of one group-version.
pub(super) fn document<'a>(kinds: impl Iterator<Item = &'a ServedKind> + Clone) -> Value {
    let (defs, names) = definitions(kinds.clone());
    let mut paths = Map::new();
    for (k, name) in kinds.zip(names) {
        let mut object = json!({"get": operation(k, &name, "read", "get")});
        if k.writable {
            let mut post = operation(k, &name, "create", "post");
            post["parameters"] = WRITE_PARAMS.map(query_param).to_vec().into();
            post["requestBody"] = json!({
                "content": {"*/*": {"schema": schema_ref(&name)}},
                "required": true
            });
            post["responses"] = responses(&name, &[("200", "OK"), ("201", "Created")]);
            paths.insert(k.collection_path(), json!({ "post": post }));
            let mut patch = operation(k, &name, "patch", "patch");
            let mut params: Vec<Value> = WRITE_PARAMS.map(query_param).to_vec();
            params.push(query_param(FORCE_PARAM));
            patch["parameters"] = params.into();
            let content: Map<String, Value> = PATCH_TYPES
                .iter()
                .map(|t| ((*t).to_owned(), json!({"schema": {"type": "object"}})))
                .collect();
            patch["requestBody"] = json!({"content": content, "required": true});
            patch["responses"] = responses(&name, &[("200", "OK"), ("201", "Created")]);
            object["patch"] = patch;
        }
        paths.insert(k.object_path(), object);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": paths,
        "components": {"schemas": defs}
    })
}
