//! Command-line options the way `PVE::JSONSchema::get_options` takes them (FORMATS §1.7):
//! `--key value` or `-key value` (also `--key=value`), booleans as `1|0|yes|no|true|false|on|off`
//! or bare, positionals first. Validation failures are PVE's exception 400 text:
//! `400 Parameter verification failed.\n<param>: <msg>\n` then a blank line and the short usage
//! (FORMATS §1.2; the messages are PVE::JSONSchema's).

use std::collections::BTreeMap;

use crate::Output;

/// Value type of an option.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// Integer with optional bounds.
    Int(Option<i64>, Option<i64>),
    /// Boolean (0/1).
    Bool,
    /// Free string.
    Str,
    /// String with a `maxLength` (Perl `length` of the undecoded argv: bytes).
    MaxLen(usize),
    /// `type => 'array'` of strings: the option repeats (`-command a -command b`), values kept in
    /// [`Parsed::lists`] (Getopt::Long `=s@`, FORMATS §1.7).
    List,
    /// One of the listed values.
    Enum(&'static [&'static str]),
    /// `pve-configid` (snapshot names): `^[a-z][a-z0-9_-]+$`i, at most 40 characters.
    ConfigId,
    /// `pve-storage-id` (`PVE::JSONSchema::parse_id` [SRC]): `^[a-z][a-z0-9\-_.]*[a-z0-9]$`i,
    /// at least 2 characters.
    StorageId,
}

/// One allowed option.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Name without dashes.
    pub name: &'static str,
    /// Type.
    pub ty: Ty,
}

/// Shorthand constructor.
pub const fn p(name: &'static str, ty: Ty) -> Param {
    Param { name, ty }
}

/// Parsed positionals and options (booleans normalised to `0`/`1`).
#[derive(Debug, Default, Clone)]
pub struct Parsed {
    /// Positional arguments in order.
    pub pos: Vec<String>,
    /// Options by name.
    pub opts: BTreeMap<String, String>,
    /// Array options ([`Ty::List`]) by name, values in order.
    pub lists: BTreeMap<String, Vec<String>>,
}

impl Parsed {
    /// Options from name/value pairs (the tests' calls).
    #[cfg(test)]
    pub(crate) fn of(pairs: &[(&str, &str)]) -> Parsed {
        let mut p = Parsed::default();
        for (k, v) in pairs {
            p.opts.insert((*k).to_string(), (*v).to_string());
        }
        p
    }

    /// Option value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.opts.get(name).map(String::as_str)
    }
    /// Integer option (already validated).
    pub fn int(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(|v| v.parse().ok())
    }
    /// Boolean option (already normalised).
    pub fn flag(&self, name: &str) -> bool {
        self.get(name) == Some("1")
    }
}

/// A list of `(param, message)` verification errors.
pub type ParamErrors = Vec<(String, String)>;

/// The exception-400 printout plus the usage line; exit 255.
pub fn param_error(errors: &ParamErrors, usage: &str) -> Output {
    let mut s = String::from("400 Parameter verification failed.\n");
    for (k, m) in errors {
        s.push_str(&format!("{k}: {m}\n"));
    }
    s.push('\n');
    s.push_str(usage);
    Output::err(&s, 255)
}

fn bool_value(v: &str) -> Option<&'static str> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "yes" | "true" | "on" => Some("1"),
        "0" | "no" | "false" | "off" => Some("0"),
        _ => None,
    }
}

/// Check one value against its type; `Err(message)` in PVE's words.
pub fn check(ty: Ty, v: &str) -> Result<String, String> {
    match ty {
        Ty::Int(min, max) => {
            let n: i64 = v
                .parse()
                .map_err(|_| format!("type check ('integer') failed - got '{v}'"))?;
            if let Some(m) = min.filter(|m| n < *m) {
                return Err(format!("value must have a minimum value of {m}"));
            }
            if let Some(m) = max.filter(|m| n > *m) {
                return Err(format!("value must have a maximum value of {m}"));
            }
            Ok(n.to_string())
        }
        Ty::Bool => bool_value(v)
            .map(str::to_string)
            .ok_or_else(|| format!("type check ('boolean') failed - got '{v}'")),
        Ty::Str | Ty::List => Ok(v.to_string()),
        // PVE::JSONSchema check_type `maxLength` [SRC pve-common].
        Ty::MaxLen(max) if v.len() > max => Err(format!("value may only be {max} characters long")),
        Ty::MaxLen(_) => Ok(v.to_string()),
        Ty::Enum(vals) => {
            if vals.contains(&v) {
                Ok(v.to_string())
            } else {
                Err(format!(
                    "value '{v}' does not have a value in the enumeration '{}'",
                    vals.join(", ")
                ))
            }
        }
        Ty::StorageId => {
            if v.len() < 2 {
                return Err(format!(
                    "invalid format - storage ID '{v}' cannot be shorter than 2 characters"
                ));
            }
            let mut chars = v.chars();
            let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && v.chars().last().is_some_and(|c| c.is_ascii_alphanumeric());
            if ok {
                Ok(v.to_string())
            } else {
                Err(format!(
                    "invalid format - storage ID '{v}' contains illegal characters"
                ))
            }
        }
        Ty::ConfigId => {
            if v.len() > 40 {
                return Err("value may only be 40 characters long".into());
            }
            let mut chars = v.chars();
            let ok = v.len() >= 2
                && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if ok {
                Ok(v.to_string())
            } else {
                Err(format!("invalid format - invalid configuration ID '{v}'"))
            }
        }
    }
}

/// Split `args` into positionals and options and validate the options against `schema`.
pub fn parse(args: &[String], schema: &[Param]) -> Result<Parsed, ParamErrors> {
    let mut out = Parsed::default();
    let mut errors = ParamErrors::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let is_opt = a.len() > 1
            && a.starts_with('-')
            && a.trim_start_matches('-')
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic());
        if !is_opt {
            out.pos.push(a.clone());
            continue;
        }
        let body = a.trim_start_matches('-');
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body.to_string(), None),
        };
        let Some(param) = schema.iter().find(|p| p.name == name) else {
            // Swallow a following value so it is not taken for a positional.
            if inline.is_none() && args.get(i).is_some_and(|n| !n.starts_with('-')) {
                i += 1;
            }
            errors.push((
                name,
                "property is not defined in schema and the schema does not allow additional properties".into(),
            ));
            continue;
        };
        let raw = match (inline, param.ty) {
            (Some(v), _) => v,
            (None, Ty::Bool) => match args.get(i).and_then(|n| bool_value(n)) {
                Some(_) => {
                    i += 1;
                    args[i - 1].clone()
                }
                None => "1".into(),
            },
            (None, _) => match args.get(i) {
                Some(v) => {
                    i += 1;
                    v.clone()
                }
                None => {
                    errors.push((name, "property is missing and it is not optional".into()));
                    continue;
                }
            },
        };
        match check(param.ty, &raw) {
            Ok(v) if matches!(param.ty, Ty::List) => out.lists.entry(name).or_default().push(v),
            Ok(v) => {
                out.opts.insert(name, v);
            }
            Err(m) => errors.push((name, m)),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_like_get_options() {
        let schema = [
            p("timeout", Ty::Int(Some(0), None)),
            p("purge", Ty::Bool),
            p("snapname", Ty::ConfigId),
        ];
        let r = parse(
            &v(&["100", "--timeout", "30", "-purge", "--snapname=ab-1"]),
            &schema,
        )
        .unwrap();
        assert_eq!(r.pos, v(&["100"]));
        assert_eq!(r.int("timeout"), Some(30));
        assert!(r.flag("purge"));
        assert_eq!(r.get("snapname"), Some("ab-1"));
        let r = parse(&v(&["--purge", "no"]), &schema).unwrap();
        assert!(!r.flag("purge"));
        let e = parse(
            &v(&["--timeout", "x", "--bogus", "1", "--snapname", "1a"]),
            &schema,
        )
        .unwrap_err();
        assert_eq!(
            e[0],
            (
                "timeout".into(),
                "type check ('integer') failed - got 'x'".into()
            )
        );
        assert_eq!(e[1].0, "bogus");
        assert_eq!(e[2].1, "invalid format - invalid configuration ID '1a'");
        let r = parse(
            &v(&["-command", "uname", "--command", "-a", "--input", "x"]),
            &[p("command", Ty::List), p("input", Ty::MaxLen(1))],
        )
        .unwrap();
        assert_eq!(r.lists["command"], v(&["uname", "-a"]));
        let long = parse(&v(&["--input", "xy"]), &[p("input", Ty::MaxLen(1))]).unwrap_err();
        assert_eq!(long[0].1, "value may only be 1 characters long");
        let out = param_error(&e[..1].to_vec(), "qm start <vmid> [OPTIONS]");
        assert_eq!(
            out.stderr,
            "400 Parameter verification failed.\ntimeout: type check ('integer') failed - got 'x'\n\nqm start <vmid> [OPTIONS]\n"
        );
        assert_eq!(out.code, 255);
    }
}
