//! Python's `==` and `in` on JSON-decoded values: the `equals` and `contains`
//! operators.
//!
//! Numbers compare as in Python: integers and floats exactly by value, and
//! booleans as the integers 0 and 1 (`1 == 1.0`, `True == 1`). [`python_contains`]
//! raises the [`TypeError`]s Python raises, worded as Python words them; the
//! Python type names in those messages (and in the pointer and `re` modules'
//! messages) come from `python_type_name`.

use serde_json::Value;

use super::TypeError;

/// The Python type name of a JSON-decoded value, as used in Python messages.
pub(super) fn python_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// A number as Python sees it: booleans are the integers 0 and 1.
#[derive(Clone, Copy)]
enum PyNumber {
    Int(i128),
    Float(f64),
}

fn python_number(value: &Value) -> Option<PyNumber> {
    match value {
        Value::Bool(b) => Some(PyNumber::Int(i128::from(*b))),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(PyNumber::Int(i128::from(i)))
            } else if let Some(u) = n.as_u64() {
                Some(PyNumber::Int(i128::from(u)))
            } else {
                n.as_f64().map(PyNumber::Float)
            }
        }
        _ => None,
    }
}

/// Exact integer/float comparison, as Python does it (no rounding of the int).
fn int_equals_float(int: i128, float: f64) -> bool {
    // Every integer here fits in 65 bits, so a float of magnitude 2^64 or
    // more cannot equal it; below that an integral float converts exactly.
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    float.is_finite() && float.fract() == 0.0 && float.abs() < TWO_POW_64 && (float as i128) == int
}

fn numbers_equal(a: PyNumber, b: PyNumber) -> bool {
    match (a, b) {
        (PyNumber::Int(x), PyNumber::Int(y)) => x == y,
        (PyNumber::Float(x), PyNumber::Float(y)) => x == y,
        (PyNumber::Int(i), PyNumber::Float(f)) | (PyNumber::Float(f), PyNumber::Int(i)) => int_equals_float(i, f),
    }
}

/// Python `a == b` on JSON-decoded values.
///
/// Numbers compare by value across integers and floats (`1 == 1.0`), booleans
/// are the numbers 0 and 1 (`True == 1`, `False == 0.0`), `null` equals only
/// `null`, strings compare by value, lists element-wise, and objects as dicts:
/// the same keys with equal values, in any order.
#[must_use]
pub fn python_equals(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (python_number(a), python_number(b)) {
        return numbers_equal(x, y);
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| python_equals(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(key, p)| y.get(key).is_some_and(|q| python_equals(p, q)))
        }
        _ => false,
    }
}

/// Python `item in container` on JSON-decoded values.
///
/// * string container: `item` must be a string, tested as a substring (the
///   empty string is in every string);
/// * list container: any element [`python_equals`] `item`;
/// * object container: `item` is a key; a number, boolean or null is never a
///   key of a JSON object (`False`), a list or object is unhashable.
///
/// # Errors
///
/// A [`TypeError`] where Python raises one: a non-string item in a string,
/// an unhashable (list or object) item in an object, or a container that is a
/// number, boolean or null.
pub fn python_contains(container: &Value, item: &Value) -> Result<bool, TypeError> {
    match container {
        Value::String(haystack) => match item {
            Value::String(needle) => Ok(haystack.contains(needle.as_str())),
            other => Err(TypeError::new(format!(
                "'in <string>' requires string as left operand, not {}",
                python_type_name(other)
            ))),
        },
        Value::Array(items) => Ok(items.iter().any(|element| python_equals(element, item))),
        Value::Object(map) => match item {
            Value::String(key) => Ok(map.contains_key(key)),
            Value::Array(_) | Value::Object(_) => {
                Err(TypeError::new(format!("unhashable type: '{}'", python_type_name(item))))
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => Ok(false),
        },
        scalar => Err(TypeError::new(format!("argument of type '{}' is not iterable", python_type_name(scalar)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equals_table() {
        let cases: &[(Value, Value, bool)] = &[
            (json!(1), json!(1.0), true),
            (json!(1.5), json!(1.5), true),
            (json!(-0.0), json!(0), true),
            (json!(true), json!(1), true),
            (json!(true), json!(1.0), true),
            (json!(false), json!(0), true),
            (json!(false), json!(0.0), true),
            (json!(true), json!(2), false),
            (json!(true), json!(true), true),
            (json!(true), json!(false), false),
            (json!("1"), json!(1), false),
            (json!("true"), json!(true), false),
            (Value::Null, json!(false), false),
            (Value::Null, json!(0), false),
            (Value::Null, json!(""), false),
            (Value::Null, Value::Null, true),
            (json!(""), json!(""), true),
            (json!("a"), json!("A"), false),
            (json!([]), json!({}), false),
            (json!([1, [2, true]]), json!([1.0, [2.0, 1]]), true),
            (json!([1, 2]), json!([2, 1]), false),
            (json!([1]), json!([1, 1]), false),
            (json!({"a": 1, "b": [false]}), json!({"b": [0], "a": 1.0}), true),
            (json!({"a": 1}), json!({"a": 1, "b": 2}), false),
            (json!({"a": 1}), json!({"b": 1}), false),
            (json!({"a": null}), json!({}), false),
            (json!(u64::MAX), json!(u64::MAX), true),
            (json!(i64::MIN), json!(i64::MIN), true),
            (json!(i64::MIN), json!(-9_223_372_036_854_775_808.0_f64), true),
            // 2^53 + 1 is not representable: Python compares exactly.
            (json!(9_007_199_254_740_993_u64), json!(9_007_199_254_740_992.0_f64), false),
            (json!(9_007_199_254_740_992_u64), json!(9_007_199_254_740_992.0_f64), true),
            // u64::MAX rounds to 2^64 as a float, which is not equal.
            (json!(u64::MAX), json!(18_446_744_073_709_551_616.0_f64), false),
            (json!(1e300), json!(1e300), true),
            (json!(1e300), json!(u64::MAX), false),
        ];
        for (a, b, expected) in cases {
            assert_eq!(python_equals(a, b), *expected, "{a} == {b}");
            assert_eq!(python_equals(b, a), *expected, "{b} == {a}");
        }
    }

    #[test]
    fn equals_with_parsed_json_numbers() {
        let a: Value = serde_json::from_str("[1, 1.0, 1e0, 10e-1, true]").unwrap();
        let items = a.as_array().unwrap();
        for x in items {
            for y in items {
                assert!(python_equals(x, y), "{x} == {y}");
            }
        }
    }

    // ---------------------------------------------------------------- contains

    #[test]
    fn contains_table() {
        let cases: &[(Value, Value, Result<bool, &str>)] = &[
            (json!("hello world"), json!("lo w"), Ok(true)),
            (json!("hello"), json!("Hello"), Ok(false)),
            (json!("hello"), json!(""), Ok(true)),
            (json!(""), json!(""), Ok(true)),
            (json!(""), json!("a"), Ok(false)),
            (json!("abc"), json!(1), Err("'in <string>' requires string as left operand, not int")),
            (json!("abc"), json!(1.5), Err("'in <string>' requires string as left operand, not float")),
            (json!("abc"), Value::Null, Err("'in <string>' requires string as left operand, not NoneType")),
            (json!("abc"), json!(["a"]), Err("'in <string>' requires string as left operand, not list")),
            (json!([1, 2, 3]), json!(2), Ok(true)),
            (json!([1, 2, 3]), json!(2.0), Ok(true)),
            (json!([1.0]), json!(1), Ok(true)),
            (json!([true]), json!(1), Ok(true)),
            (json!([0]), json!(false), Ok(true)),
            (json!(["1"]), json!(1), Ok(false)),
            (json!([[1, 2]]), json!([1.0, 2]), Ok(true)),
            (json!([{"a": 1}]), json!({"a": true}), Ok(true)),
            (json!([null]), Value::Null, Ok(true)),
            (json!([]), Value::Null, Ok(false)),
            (json!(["ab"]), json!("a"), Ok(false)),
            (json!({"key": 1}), json!("key"), Ok(true)),
            (json!({"key": 1}), json!("missing"), Ok(false)),
            (json!({"1": 1}), json!(1), Ok(false)),
            (json!({"true": 1}), json!(true), Ok(false)),
            (json!({"null": 1}), Value::Null, Ok(false)),
            (json!({"a": 1}), json!(["a"]), Err("unhashable type: 'list'")),
            (json!({"a": 1}), json!({"a": 1}), Err("unhashable type: 'dict'")),
            (json!(5), json!(5), Err("argument of type 'int' is not iterable")),
            (json!(5.5), json!("5"), Err("argument of type 'float' is not iterable")),
            (json!(true), json!(true), Err("argument of type 'bool' is not iterable")),
            (Value::Null, json!("a"), Err("argument of type 'NoneType' is not iterable")),
        ];
        for (container, item, expected) in cases {
            let got = python_contains(container, item).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_owned), "{item} in {container}");
        }
    }
}
