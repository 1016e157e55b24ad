//! How a JSON Schema is generated from a type (draft 2020-12): one setting shared by the
//! schema files `elengtis schema` writes ([`crate::schema`]) and the record reader that
//! locates a bad field in a record by its schema ([`crate::records`]).

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};

/// The schema of `T`, as `elengtis schema` writes it.
pub fn schema_for<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>()
}
