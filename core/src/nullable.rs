//! Fields that must be present and may be null (records, and the judge's evaluations).
//!
//! Both this tool and the original write every field of a row, `null` included: a row
//! without `proposed` is malformed, not "unknown". serde would read an absent `Option` field
//! as `None` and schemars would leave it out of `required`; a field marked
//!
//! ```ignore
//! #[serde(deserialize_with = "nullable::present")]
//! #[schemars(with = "nullable::Nullable<T>")]
//! pub field: Option<T>,
//! ```
//!
//! is required by both, and its schema still allows `null`.

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};

/// Reads a present field, `null` as `None`. (With `deserialize_with`, serde reports an
/// absent field as missing instead of defaulting it.)
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}

/// The schema of `Option<T>` for a field that is required.
#[derive(Debug)]
pub(crate) struct Nullable<T>(PhantomData<T>);

impl<T: JsonSchema> JsonSchema for Nullable<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Option::<T>::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        Option::<T>::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        Option::<T>::json_schema(generator)
    }
}
