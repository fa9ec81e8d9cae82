//! ConfigMaps, Secrets and ServiceAccounts (`pkg/registry/core/{configmap,secret,
//! serviceaccount}`): their validation is `podvisor_api::validation`'s, a Secret is defaulted
//! and its `stringData` merged into `data` (never stored; its keys are owned as `data` keys).

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use podvisor_api::ValidationErrors;
use serde_json::{Value, json};

use super::{Rules, Strategy};
use crate::db::{CONFIGMAPS, SECRETS, SERVICEACCOUNTS};

pub(super) static CONFIGMAP: Strategy = Strategy {
    short_names: &["cm"],
    ..Strategy::typed::<ConfigMap>(CONFIGMAPS, "configmap")
};

pub(super) static SECRET: Strategy = Strategy {
    managed_source: without_string_data,
    ..Strategy::typed::<Secret>(SECRETS, "secret")
};

pub(super) static SERVICEACCOUNT: Strategy = Strategy {
    short_names: &["sa"],
    ..Strategy::typed::<ServiceAccount>(SERVICEACCOUNTS, "serviceaccount")
};

/// A Secret as its writer owns it: `stringData`'s keys as `data` keys.
fn without_string_data(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut()
        && let Some(strings) = m.remove("stringData").and_then(|s| s.as_object().cloned())
        && let Some(d) = m.entry("data").or_insert_with(|| json!({})).as_object_mut()
    {
        for k in strings.keys() {
            d.insert(k.clone(), json!(""));
        }
    }
    v
}

impl Rules for ConfigMap {
    fn validate(&self) -> Result<(), ValidationErrors> {
        podvisor_api::validation::validate_config_map(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        podvisor_api::validation::validate_config_map_update(self, old)
    }
}

impl Rules for Secret {
    fn prepare(&mut self) {
        podvisor_api::config::prepare_secret(self);
    }
    fn validate(&self) -> Result<(), ValidationErrors> {
        podvisor_api::validation::validate_secret(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        podvisor_api::validation::validate_secret_update(self, old)
    }
}

impl Rules for ServiceAccount {
    fn validate(&self) -> Result<(), ValidationErrors> {
        podvisor_api::validation::validate_service_account(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        podvisor_api::validation::validate_service_account_update(self, old)
    }
}
