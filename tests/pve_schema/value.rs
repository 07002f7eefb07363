//! One value against one PVE JSON-schema property, the way PVE::JSONSchema checks it: type,
//! range, length, enum, pattern and format (a property string is checked key by key).

use regex::Regex;
use serde_json::{Map, Value};

use super::formats;

/// The property a parameter name means: itself, or `net[n]` for `net0`.
pub fn property<'a>(props: &'a Value, name: &str) -> Option<(String, &'a Value)> {
    let props = props.as_object()?;
    if let Some(s) = props.get(name) {
        return Some((name.to_string(), s));
    }
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if stem.len() < name.len() {
        let key = format!("{stem}[n]");
        return props.get(&key).map(|s| (key, s));
    }
    None
}

/// Check `v` against `schema`.
pub fn check(schema: &Value, v: &str) -> Result<(), String> {
    let ty = schema["type"].as_str().unwrap_or("string");
    match ty {
        "integer" => {
            let n: i64 = v
                .strip_prefix('+')
                .unwrap_or(v)
                .parse()
                .map_err(|_| "not an integer".to_string())?;
            range(schema, n as f64)?;
        }
        "number" => {
            let n: f64 = v.parse().map_err(|_| "not a number".to_string())?;
            range(schema, n)?;
        }
        // PVE::JSONSchema::check_type takes `1` and `0` (property strings first map
        // yes/no/on/off/true/false to them, see [`property_string`]).
        "boolean" => {
            if v != "1" && v != "0" {
                return Err("not a boolean (1 or 0)".into());
            }
        }
        // An array parameter is given once per element (`--command a --command b`).
        "array" => return check(&schema["items"], v),
        "string" => {
            let len = v.chars().count() as u64;
            if let Some(max) = schema["maxLength"].as_u64()
                && len > max
            {
                return Err(format!("longer than {max}"));
            }
            if let Some(min) = schema["minLength"].as_u64()
                && len < min
            {
                return Err(format!("shorter than {min}"));
            }
        }
        t => return Err(format!("type {t} is not checked by this test")),
    }
    if let Some(e) = schema["enum"].as_array()
        && !e
            .iter()
            .any(|x| x.as_str() == Some(v) || x.as_i64().is_some_and(|n| n.to_string() == v))
    {
        return Err(format!("not one of {e:?}"));
    }
    if let Some(p) = schema["pattern"].as_str() {
        let re = Regex::new(&format!("^(?:{p})$")).map_err(|e| format!("pattern {p}: {e}"))?;
        if !re.is_match(v) {
            return Err(format!("does not match /{p}/"));
        }
    }
    match &schema["format"] {
        Value::Null => Ok(()),
        Value::String(f) => formats::check(f, v),
        Value::Object(dict) => property_string(dict, v),
        f => Err(format!("format {f} is not checked by this test")),
    }
}

fn range(schema: &Value, n: f64) -> Result<(), String> {
    if let Some(min) = schema["minimum"].as_f64()
        && n < min
    {
        return Err(format!("below {min}"));
    }
    if let Some(max) = schema["maximum"].as_f64()
        && n > max
    {
        return Err(format!("above {max}"));
    }
    Ok(())
}

/// A property string (`virtio,bridge=vmbr0,firewall=1`): `key=value` pairs joined by `,`, a
/// bare value for the `default_key`, `alias` and `keyAlias` keys (`virtio=MAC` sets
/// `model=virtio` and `macaddr=MAC`), every required key present
/// (PVE::JSONSchema::parse_property_string).
pub fn property_string(dict: &Map<String, Value>, v: &str) -> Result<(), String> {
    let mut seen = Vec::new();
    for part in v.split(',') {
        let (key, val) = match part.split_once('=') {
            Some((k, val)) => (k.to_string(), val),
            None => {
                let k = dict
                    .iter()
                    .find(|(_, s)| s["default_key"].as_i64() == Some(1) || s["default_key"] == true)
                    .map(|(k, _)| k.clone())
                    .ok_or_else(|| format!("`{part}` without a key, and no default key"))?;
                (k, part)
            }
        };
        let s = dict
            .get(&key)
            .ok_or_else(|| format!("property string key `{key}` does not exist"))?;
        if let Some(alias) = s["alias"].as_str() {
            // `virtio=MAC`: the key is the value of keyAlias, the value is alias's.
            if let Some(ka) = s["keyAlias"].as_str() {
                seen.push(ka.to_string());
            }
            check(&dict[alias], val).map_err(|e| format!("{key}={val}: {e}"))?;
            seen.push(alias.to_string());
            continue;
        }
        if seen.contains(&key) {
            return Err(format!("key `{key}` twice"));
        }
        let val = match (s["type"].as_str(), val.to_ascii_lowercase().as_str()) {
            (Some("boolean"), "1" | "on" | "yes" | "true") => "1",
            (Some("boolean"), "0" | "off" | "no" | "false") => "0",
            _ => val,
        };
        check(s, val).map_err(|e| format!("{key}={val}: {e}"))?;
        seen.push(key);
    }
    for (k, s) in dict {
        let optional = s["optional"].as_i64() == Some(1) || s["optional"] == true;
        if !optional && s["alias"].is_null() && !seen.contains(k) {
            return Err(format!("property string lacks `{k}`"));
        }
    }
    Ok(())
}
