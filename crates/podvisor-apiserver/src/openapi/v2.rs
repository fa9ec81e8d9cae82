//! `/openapi/v2`: the Swagger 2.0 document of every served kind, from the same definitions
//! as v3 in their v2 form (references under `#/definitions/`, a reference with a description
//! as the API server writes it rather than v3's `allOf` wrapper).

use serde_json::{Map, Value, json};

use super::{FORCE_PARAM, PATCH_TYPES, ServedKind, WRITE_PARAMS, definitions};

const V3_REFS: &str = "#/components/schemas/";
const V2_REFS: &str = "#/definitions/";
const PRODUCES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// A v3 schema in its v2 form.
fn v2_schema(mut schema: Value) -> Value {
    let Some(obj) = schema.as_object_mut() else {
        return schema;
    };
    // `{allOf: [{$ref}], description}` → `{$ref, description}`.
    let single_ref = obj
        .get("allOf")
        .and_then(Value::as_array)
        .filter(|all| all.len() == 1)
        .and_then(|all| all[0].get("$ref"))
        .cloned();
    if let Some(reference) = single_ref {
        obj.remove("allOf");
        obj.insert("$ref".to_owned(), reference);
    }
    obj.remove("nullable");
    if let Some(Value::String(reference)) = obj.get_mut("$ref")
        && let Some(name) = reference.strip_prefix(V3_REFS)
    {
        *reference = format!("{V2_REFS}{name}");
    }
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for value in props.values_mut() {
            *value = v2_schema(value.take());
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(value) = obj.get_mut(key).filter(|v| v.is_object()) {
            *value = v2_schema(value.take());
        }
    }
    if let Some(Value::Array(all)) = obj.get_mut("allOf") {
        for value in all {
            *value = v2_schema(value.take());
        }
    }
    schema
}

fn query_param((name, description): (&str, &str)) -> Value {
    json!({"uniqueItems": true, "type": "string", "description": description, "name": name, "in": "query"})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"uniqueItems": true, "type": "string", "description": description, "name": name, "in": "path", "required": true})
}

fn body_param(schema: Value) -> Value {
    json!({"name": "body", "in": "body", "required": true, "schema": schema})
}

fn operation(k: &ServedKind, reference: &Value, verb: &str, action: &str) -> Value {
    json!({
        "description": format!("{verb} the specified {}", k.kind),
        "consumes": ["*/*"],
        "produces": PRODUCES,
        "schemes": ["https"],
        "tags": [k.tag()],
        "operationId": k.operation_id(verb),
        "responses": {
            "200": {"description": "OK", "schema": reference},
            "401": {"description": "Unauthorized"}
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": k.gvk(),
    })
}

/// The document of `kinds`.
pub(super) fn document(kinds: &[ServedKind]) -> Value {
    let (defs, names) = definitions(kinds);
    let definitions: Map<String, Value> = defs
        .into_iter()
        .map(|(name, schema)| (name, v2_schema(schema)))
        .collect();
    let mut paths = Map::new();
    let namespace = path_param(
        "namespace",
        "object name and auth scope, such as for teams and projects",
    );
    for (k, name) in kinds.iter().zip(names) {
        let reference = json!({"$ref": format!("{V2_REFS}{name}")});
        let scope: Vec<Value> = if k.namespaced {
            vec![namespace.clone()]
        } else {
            Vec::new()
        };
        let mut object_params = vec![path_param("name", &format!("name of the {}", k.kind))];
        object_params.extend(scope.iter().cloned());
        let mut object = json!({
            "get": operation(k, &reference, "read", "get"),
            "parameters": object_params,
        });
        if k.writable {
            let mut post = operation(k, &reference, "create", "post");
            let mut params = vec![body_param(reference.clone())];
            params.extend(WRITE_PARAMS.map(query_param));
            post["parameters"] = params.into();
            post["responses"]["201"] = json!({"description": "Created", "schema": reference});
            paths.insert(
                k.collection_path(),
                json!({"post": post, "parameters": scope}),
            );
            let mut patch = operation(k, &reference, "patch", "patch");
            patch["consumes"] = json!(PATCH_TYPES);
            let mut params = vec![body_param(json!({"type": "object"}))];
            params.extend(WRITE_PARAMS.map(query_param));
            params.push(query_param(FORCE_PARAM));
            patch["parameters"] = params.into();
            patch["responses"]["201"] = json!({"description": "Created", "schema": reference});
            object["patch"] = patch;
        }
        paths.insert(k.object_path(), object);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_take_the_v2_form() {
        let v3 = json!({
            "type": "object",
            "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.M"}], "description": "d"},
                "items": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.I"}},
                "map": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/io.k8s.Q"}, "nullable": true}
            }
        });
        assert_eq!(
            v2_schema(v3),
            json!({
                "type": "object",
                "properties": {
                    "metadata": {"$ref": "#/definitions/io.k8s.M", "description": "d"},
                    "items": {"type": "array", "items": {"$ref": "#/definitions/io.k8s.I"}},
                    "map": {"type": "object", "additionalProperties": {"$ref": "#/definitions/io.k8s.Q"}}
                }
            })
        );
    }
}
