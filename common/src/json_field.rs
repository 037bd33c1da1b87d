//! A published document's field written and read by way of a `serde_json::Value`.
//!
//! Written: the evidence's `mutation_check` and the suite report's `audit` and `history` were
//! held as `serde_json::Value` before they had types of their own, and a `Value`'s map sorts
//! its keys (serde_json is built without `preserve_order`): that is the order those fields
//! have always been written in, and serialising them through a `Value` keeps the documents
//! byte-identical. Read: a field that does not match its type is refused with the field's name
//! in front of serde's own words, which name only the type (`mutation_check: invalid type:
//! string "x", expected struct MutationCheck`).

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer, ser::Error as _};

/// `serialize_with` for a field written as its `serde_json::Value` (an `Option` too).
pub fn sorted<T: Serialize, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(S::Error::custom)?
        .serialize(serializer)
}

/// Reads the field `name` as a `T`; an error names the field. Meant for a field's own
/// `deserialize_with` function, which passes its name.
pub fn named<'de, T: DeserializeOwned, D: Deserializer<'de>>(
    name: &str,
    deserializer: D,
) -> Result<T, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    serde_json::from_value(value).map_err(|e| D::Error::custom(format_args!("{name}: {e}")))
}

/// Reads a document's `schema`, refusing any other than `expected`.
pub fn schema<'de, D: Deserializer<'de>>(
    expected: &str,
    deserializer: D,
) -> Result<String, D::Error> {
    let schema = String::deserialize(deserializer)?;
    if schema != expected {
        return Err(D::Error::custom(format_args!(
            "schema: {schema:?} is not {expected:?} (hint: was it written by another version of Assay?)"
        )));
    }
    Ok(schema)
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    #[derive(Serialize)]
    struct Field {
        zone: u32,
        after: Inner,
    }

    #[derive(Serialize)]
    struct Inner {
        second: bool,
        first: bool,
    }

    #[derive(Serialize)]
    struct Document {
        schema: &'static str,
        #[serde(serialize_with = "super::sorted")]
        field: Field,
        last: u8,
    }

    #[test]
    fn a_sorted_field_sorts_its_own_keys_at_every_depth_and_no_others() {
        let doc = Document {
            schema: "x/v1",
            field: Field {
                zone: 1,
                after: Inner {
                    second: true,
                    first: false,
                },
            },
            last: 2,
        };
        assert_eq!(
            serde_json::to_string(&doc).unwrap(),
            r#"{"schema":"x/v1","field":{"after":{"first":false,"second":true},"zone":1},"last":2}"#
        );
    }

    #[derive(Debug, serde::Deserialize)]
    struct Read {
        #[serde(deserialize_with = "zone")]
        zone: u32,
    }

    fn zone<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        super::named("zone", d)
    }

    #[test]
    fn a_named_field_that_does_not_parse_says_which_field() {
        let read: Read = serde_json::from_str(r#"{"zone": 3}"#).unwrap();
        assert_eq!(read.zone, 3);
        let err = serde_json::from_str::<Read>(r#"{"zone": "north"}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"zone: invalid type: string "north", expected u32 at line 1 column 17"#
        );
    }
}
