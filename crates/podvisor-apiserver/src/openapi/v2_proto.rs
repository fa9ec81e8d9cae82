//! The v2 document as gnostic's `openapi.v2.Document` protobuf (`openapiv2/OpenAPIv2.proto`),
//! which kubectl and client-go's `OpenAPISchema` ask for. Only the messages and fields the
//! document uses are declared, with gnostic's field numbers; a `oneof` is declared as the
//! optional fields it is on the wire. Vendor extensions carry their value as YAML text
//! (`Any.yaml`), which JSON is.

use prost::Message;
use serde_json::Value;

#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

#[derive(Clone, PartialEq, Message)]
struct Paths {
    #[prost(message, repeated, tag = "2")]
    path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedPathItem {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct PathItem {
    #[prost(message, optional, tag = "2")]
    get: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    post: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    parameters: Vec<ParametersItem>,
}

#[derive(Clone, PartialEq, Message)]
struct Operation {
    #[prost(string, repeated, tag = "1")]
    tags: Vec<String>,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "5")]
    operation_id: String,
    #[prost(string, repeated, tag = "6")]
    produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    schemes: Vec<String>,
    #[prost(message, repeated, tag = "13")]
    vendor_extension: Vec<NamedAny>,
}

/// `oneof { Parameter parameter = 1; JsonReference json_reference = 2; }`.
#[derive(Clone, PartialEq, Message)]
struct ParametersItem {
    #[prost(message, optional, tag = "1")]
    parameter: Option<Parameter>,
}

/// `oneof { BodyParameter body_parameter = 1; NonBodyParameter non_body_parameter = 2; }`.
#[derive(Clone, PartialEq, Message)]
struct Parameter {
    #[prost(message, optional, tag = "1")]
    body_parameter: Option<BodyParameter>,
    #[prost(message, optional, tag = "2")]
    non_body_parameter: Option<NonBodyParameter>,
}

#[derive(Clone, PartialEq, Message)]
struct BodyParameter {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(string, tag = "2")]
    name: String,
    #[prost(string, tag = "3")]
    r#in: String,
    #[prost(bool, tag = "4")]
    required: bool,
    #[prost(message, optional, tag = "5")]
    schema: Option<Schema>,
}

/// `oneof { ... QueryParameterSubSchema query_parameter_sub_schema = 3;
/// PathParameterSubSchema path_parameter_sub_schema = 4; }`.
#[derive(Clone, PartialEq, Message)]
struct NonBodyParameter {
    #[prost(message, optional, tag = "3")]
    query_parameter_sub_schema: Option<QueryParameterSubSchema>,
    #[prost(message, optional, tag = "4")]
    path_parameter_sub_schema: Option<PathParameterSubSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct QueryParameterSubSchema {
    #[prost(bool, tag = "1")]
    required: bool,
    #[prost(string, tag = "2")]
    r#in: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "4")]
    name: String,
    #[prost(string, tag = "6")]
    r#type: String,
    #[prost(bool, tag = "20")]
    unique_items: bool,
}

#[derive(Clone, PartialEq, Message)]
struct PathParameterSubSchema {
    #[prost(bool, tag = "1")]
    required: bool,
    #[prost(string, tag = "2")]
    r#in: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "4")]
    name: String,
    #[prost(string, tag = "5")]
    r#type: String,
    #[prost(bool, tag = "19")]
    unique_items: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Responses {
    #[prost(message, repeated, tag = "1")]
    response_code: Vec<NamedResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedResponseValue {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<ResponseValue>,
}

/// `oneof { Response response = 1; JsonReference json_reference = 2; }`.
#[derive(Clone, PartialEq, Message)]
struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    response: Option<Response>,
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(message, optional, tag = "2")]
    schema: Option<SchemaItem>,
}

/// `oneof { Schema schema = 1; FileSchema file_schema = 2; }`.
#[derive(Clone, PartialEq, Message)]
struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    schema: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Schema {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, optional, boxed, tag = "21")]
    additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    properties: Option<Properties>,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}

/// `oneof { Schema schema = 1; bool boolean = 2; }`.
#[derive(Clone, PartialEq, Message)]
struct AdditionalPropertiesItem {
    #[prost(message, optional, tag = "1")]
    schema: Option<Schema>,
    #[prost(bool, optional, tag = "2")]
    boolean: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Properties {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn texts(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn extensions(v: &Value) -> Vec<NamedAny> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, value)| NamedAny {
            name: k.clone(),
            value: Some(Any {
                yaml: value.to_string(),
            }),
        })
        .collect()
}

fn named_schemas(v: Option<&Value>) -> Vec<NamedSchema> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, s)| NamedSchema {
            name: name.clone(),
            value: Some(schema(s)),
        })
        .collect()
}

fn schema(v: &Value) -> Schema {
    let types = match v.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    Schema {
        r#ref: text(v, "$ref"),
        format: text(v, "format"),
        description: text(v, "description"),
        required: texts(v, "required"),
        additional_properties: v.get("additionalProperties").map(|a| {
            Box::new(match a {
                Value::Bool(b) => AdditionalPropertiesItem {
                    schema: None,
                    boolean: Some(*b),
                },
                other => AdditionalPropertiesItem {
                    schema: Some(schema(other)),
                    boolean: None,
                },
            })
        }),
        r#type: (!types.is_empty()).then_some(TypeItem { value: types }),
        items: v.get("items").map(|i| ItemsItem {
            schema: vec![schema(i)],
        }),
        all_of: v
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(schema)
            .collect(),
        properties: v.get("properties").map(|p| Properties {
            additional_properties: named_schemas(Some(p)),
        }),
        vendor_extension: extensions(v),
    }
}

fn parameter(p: &Value) -> ParametersItem {
    let parameter = if text(p, "in") == "body" {
        Parameter {
            body_parameter: Some(BodyParameter {
                description: text(p, "description"),
                name: text(p, "name"),
                r#in: text(p, "in"),
                required: p["required"].as_bool().unwrap_or(false),
                schema: p.get("schema").map(schema),
            }),
            non_body_parameter: None,
        }
    } else {
        let required = p["required"].as_bool().unwrap_or(false);
        let unique_items = p["uniqueItems"].as_bool().unwrap_or(false);
        let non_body = if text(p, "in") == "path" {
            NonBodyParameter {
                query_parameter_sub_schema: None,
                path_parameter_sub_schema: Some(PathParameterSubSchema {
                    required,
                    r#in: text(p, "in"),
                    description: text(p, "description"),
                    name: text(p, "name"),
                    r#type: text(p, "type"),
                    unique_items,
                }),
            }
        } else {
            NonBodyParameter {
                query_parameter_sub_schema: Some(QueryParameterSubSchema {
                    required,
                    r#in: text(p, "in"),
                    description: text(p, "description"),
                    name: text(p, "name"),
                    r#type: text(p, "type"),
                    unique_items,
                }),
                path_parameter_sub_schema: None,
            }
        };
        Parameter {
            body_parameter: None,
            non_body_parameter: Some(non_body),
        }
    };
    ParametersItem {
        parameter: Some(parameter),
    }
}

fn parameters(v: &Value) -> Vec<ParametersItem> {
    v.get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(parameter)
        .collect()
}

fn operation(v: &Value) -> Operation {
    let responses = v
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(code, r)| NamedResponseValue {
            name: code.clone(),
            value: Some(ResponseValue {
                response: Some(Response {
                    description: text(r, "description"),
                    schema: r.get("schema").map(|s| SchemaItem {
                        schema: Some(schema(s)),
                    }),
                }),
            }),
        })
        .collect();
    Operation {
        tags: texts(v, "tags"),
        description: text(v, "description"),
        operation_id: text(v, "operationId"),
        produces: texts(v, "produces"),
        consumes: texts(v, "consumes"),
        parameters: parameters(v),
        responses: Some(Responses {
            response_code: responses,
        }),
        schemes: texts(v, "schemes"),
        vendor_extension: extensions(v),
    }
}

/// The protobuf of the JSON v2 document `doc` (as [`super::v2::document`] makes it).
pub(super) fn encode(doc: &Value) -> Vec<u8> {
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(path, item)| NamedPathItem {
            name: path.clone(),
            value: Some(PathItem {
                get: item.get("get").map(operation),
                post: item.get("post").map(operation),
                patch: item.get("patch").map(operation),
                parameters: parameters(item),
            }),
        })
        .collect();
    Document {
        swagger: text(doc, "swagger"),
        info: doc.get("info").map(|i| Info {
            title: text(i, "title"),
            version: text(i, "version"),
        }),
        paths: Some(Paths { path: paths }),
        definitions: Some(Definitions {
            additional_properties: named_schemas(doc.get("definitions")),
        }),
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Field numbers as gnostic's: a `Document` with `swagger` (1) and `info` (2: title 1,
    /// version 2), a schema's `$ref` (1) and `type` (22: value 1).
    #[test]
    fn the_wire_has_gnostics_field_numbers() {
        let bytes = encode(&json!({"swagger": "2.0", "info": {"title": "K", "version": "v"}}));
        assert_eq!(
            &bytes[..13],
            &[
                0x0a, 3, b'2', b'.', b'0', 0x12, 6, 0x0a, 1, b'K', 0x12, 1, b'v'
            ]
        );
        let s = schema(&json!({"$ref": "#/definitions/x", "type": "string"})).encode_to_vec();
        assert_eq!(
            s,
            [
                &[0x0a, 15][..],
                b"#/definitions/x",
                &[0xb2, 0x01, 8, 0x0a, 6],
                b"string"
            ]
            .concat()
        );
        let decoded = Document::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded.info.unwrap().version, "v");
    }
}
