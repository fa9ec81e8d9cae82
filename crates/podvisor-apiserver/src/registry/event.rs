//! Core `v1` Events as clients write them (`pkg/registry/core/event`): stored as sent once they
//! decode as an Event with a name; a delete answers with the object. Their expiry and the
//! scheduler's `Scheduled` event are `events.rs`'s; `events.k8s.io/v1` converts to and from
//! these (`events_v1.rs`).

use k8s_openapi::api::core::v1::Event;
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{FieldError, Path};

use super::{Rules, Strategy};
use crate::db::EVENTS;

pub(crate) static EVENT: Strategy = Strategy {
    short_names: &["ev"],
    delete_returns_object: true,
    ..Strategy::typed::<Event>(EVENTS, "event")
};

impl Rules for Event {
    fn validate(&self) -> Result<(), ValidationErrors> {
        if self.metadata.name.as_deref().unwrap_or("").is_empty() {
            return Err(ValidationErrors::new(
                "Event",
                "",
                vec![FieldError::required(
                    &Path::new("metadata").child("name"),
                    "name or generateName is required",
                )],
            ));
        }
        Ok(())
    }
    fn validate_update(&self, _old: &Self) -> Result<(), ValidationErrors> {
        self.validate()
    }
}
