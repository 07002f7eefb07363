//! The small text tools: `pvesm status|list`, `pveam update|available|list|download`,
//! `ha-manager status`, `pvecm status|nodes` — faithful printouts of the REAL fixtures cited on
//! each function.

use crate::args::{self, Ty, p};
use crate::qm::cli_task_output;
use crate::state::State;
use crate::{Ctx, Failure, Output, storage_ops, timefmt};

/// `pvesm …`.
pub fn pvesm(st: &mut State, ctx: &Ctx, argv: &[String]) -> Output {
    match argv.first().map(String::as_str) {
        Some("status") => {
            let schema = [
                p("storage", Ty::Str),
                p("content", Ty::Str),
                p("enabled", Ty::Bool),
                p("target", Ty::Str),
            ];
            match args::parse(&argv[1..], &schema) {
                Ok(o) => match pvesm_status(st, &st.local_node, o.get("storage"), o.get("content"))
                {
                    Ok(s) => Output::ok(s),
                    Err(f) => f.into(),
                },
                Err(e) => args::param_error(&e, "pvesm status [OPTIONS]"),
            }
        }
        Some("list") => {
            let schema = [
                p("content", Ty::Str),
                p("vmid", Ty::Int(Some(100), Some(999_999_999))),
            ];
            let usage = "pvesm list <storage> [OPTIONS]";
            match args::parse(&argv[1..], &schema) {
                Ok(o) if o.pos.len() == 1 => {
                    match pvesm_list(st, &o.pos[0], o.get("content"), o.int("vmid")) {
                        Ok(s) => Output::ok(s),
                        Err(f) => f.into(),
                    }
                }
                Ok(_) => Output::err(&format!("400 wrong number of arguments\n{usage}"), 255),
                Err(e) => args::param_error(&e, usage),
            }
        }
        Some("free") => pvesm_free(st, ctx, &argv[1..]),
        Some(c) => Output::err(
            &format!("unknown command 'pvesm {c}'\nUSAGE: pvesm <COMMAND> [ARGS] [OPTIONS]"),
            255,
        ),
        None => Output::err(
            "ERROR: no command specified\nUSAGE: pvesm <COMMAND> [ARGS] [OPTIONS]",
            255,
        ),
    }
}

/// `pvesm status` (FORMATS §3.4; REAL `pvesm_status_pve9.1_kib_header.txt`): PVE ≥ 9.1 header
/// with `(KiB)`, name column `maxlen = longest id + 1`, rows sorted by id.
pub fn pvesm_status(
    st: &State,
    node: &str,
    only: Option<&str>,
    content: Option<&str>,
) -> Result<String, Failure> {
    if let Some(sid) = only
        && st.storage(sid).is_none()
    {
        return Err(Failure::die(format!("storage '{sid}' does not exist")));
    }
    let mut rows: Vec<_> = st
        .storages
        .iter()
        .filter(|s| only.is_none_or(|o| o == s.id))
        .filter(|s| content.is_none_or(|c| s.content.iter().any(|x| x == c)))
        .collect();
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    let maxlen = rows.iter().map(|s| s.id.len()).max().unwrap_or(0).max(4) + 1;
    let mut out = format!(
        "{:<maxlen$} {:>10} {:>10} {:>15} {:>15} {:>15} {:>8}\n",
        "Name", "Type", "Status", "Total (KiB)", "Used (KiB)", "Available (KiB)", "%"
    );
    for s in rows {
        let used = st.storage_used(node, s);
        let pct = used as f64 * 100.0 / s.total as f64;
        out.push_str(&format!(
            "{:<maxlen$} {:>10} {:>10} {:>15} {:>15} {:>15} {:>7.2}%\n",
            s.id,
            s.kind,
            "active",
            s.total / 1024,
            used / 1024,
            (s.total - used) / 1024,
            pct
        ));
    }
    Ok(out)
}

/// `pvesm list <storage>` (FORMATS §3.5; REAL lines in
/// `pvesh_create_start_stop_upid_nextid_pvesm_list_pve8.transcript.txt`):
/// `"%-${maxvolid}s %-7s %-9s %${sizedigits}s %s\n"`, rows with a VMID first.
pub fn pvesm_list(
    st: &State,
    sid: &str,
    content: Option<&str>,
    vmid: Option<i64>,
) -> Result<String, Failure> {
    let v = crate::api::storage_content(
        st,
        &st.local_node,
        sid,
        content,
        vmid.and_then(|v| u32::try_from(v).ok()),
    )?;
    let mut rows: Vec<(String, String, String, u64, String)> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["volid"].as_str().unwrap_or_default().to_string(),
                e["format"].as_str().unwrap_or_default().to_string(),
                e["content"].as_str().unwrap_or_default().to_string(),
                e["size"].as_u64().unwrap_or(0),
                e.get("vmid").map(|v| v.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    if rows.is_empty() {
        return Ok(String::new());
    }
    rows.sort_by(|a, b| (a.4.is_empty(), &a.1, &a.0).cmp(&(b.4.is_empty(), &b.1, &b.0)));
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(5).max(5);
    let d = rows
        .iter()
        .map(|r| r.3.to_string().len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:<w$} {:<7} {:<9} {:>d$} {}\n",
        "Volid", "Format", "Type", "Size", "VMID"
    );
    for (volid, format, kind, size, vmid) in rows {
        out.push_str(&format!(
            "{volid:<w$} {format:<7} {kind:<9} {size:>d$} {vmid}\n"
        ));
    }
    Ok(out)
}

/// `pveam …` (FORMATS §3.12).
pub fn pveam(st: &mut State, ctx: &Ctx, argv: &[String]) -> Output {
    let cmd = argv.first().map(String::as_str);
    let rest = argv.get(1..).unwrap_or_default();
    match cmd {
        Some("update") => Output::ok("update successful\n"),
        Some("available") => {
            let schema = [p("section", Ty::Enum(&["system", "mail", "turnkeylinux"]))];
            let o = match args::parse(rest, &schema) {
                Ok(o) => o,
                Err(e) => return args::param_error(&e, "pveam available  [OPTIONS]"),
            };
            // REAL pveam_available_section_system_pve8.txt: "%-15s %s\n" (2 columns before 9.2.7).
            Output::ok(
                storage_ops::APPLIANCES
                    .iter()
                    .filter(|(s, _)| o.get("section").is_none_or(|x| x == *s))
                    .map(|(s, t)| format!("{s:<15} {t}\n"))
                    .collect::<String>(),
            )
        }
        Some("list") => {
            let Some(sid) = rest.first() else {
                return Output::err(
                    "400 not enough arguments\npveam list <storage> [OPTIONS]",
                    255,
                );
            };
            let Some(s) = st.storage(sid) else {
                return Output::err(&format!("storage '{sid}' does not exist"), 255);
            };
            if !s.content.iter().any(|c| c == "vztmpl") {
                return Output::err("Storage does not support templates!", 255);
            }
            // FORMATS §3.12 [SRC]: header "%-60s %-6s\n", rows "%-60s %-4.2fMB\n".
            let mut out = format!("{:<60} {:<6}\n", "NAME", "SIZE");
            for v in st
                .volumes
                .iter()
                .filter(|v| v.node == st.local_node && v.storage == *sid && v.content == "vztmpl")
            {
                out.push_str(&format!(
                    "{:<60} {:<4.2}MB\n",
                    v.volid(),
                    v.size as f64 / 1_048_576.0
                ));
            }
            Output::ok(out)
        }
        Some("download") => pveam_download(st, ctx, rest),
        Some(c) => Output::err(
            &format!("unknown command 'pveam {c}'\nUSAGE: pveam <COMMAND> [ARGS] [OPTIONS]"),
            255,
        ),
        None => Output::err(
            "ERROR: no command specified\nUSAGE: pveam <COMMAND> [ARGS] [OPTIONS]",
            255,
        ),
    }
}

/// `pveam download <storage> <template>`: [`storage_ops::apl_download`] (a `download` task whose
/// UPID id is the file name, FORMATS §3.12 [SRC]); no UPID printed, exit 0 even when the task
/// failed (no outsub in pveam's cmddef [INFER]); pre-fork errors exit 255.
fn pveam_download(st: &mut State, ctx: &Ctx, rest: &[String]) -> Output {
    if rest.len() != 2 {
        return Output::err(
            "400 wrong number of arguments\npveam download <storage> <template>",
            255,
        );
    }
    let local = st.local_node.clone();
    match storage_ops::apl_download(st, ctx, &local, &rest[0], &rest[1]) {
        Ok(run) => {
            let mut out = cli_task_output(&run);
            out.code = 0;
            out
        }
        Err(f) => {
            let mut o = Output::from(f);
            if o.stderr.starts_with("400 ") {
                o.stderr.push_str("\npveam download <storage> <template>\n");
            }
            o
        }
    }
}

/// `pvesm free <volume> [--storage S] [--delay N]`: [`storage_ops::free`]; the task log on stdout,
/// no UPID, exit 0 even when the task failed (no outsub [INFER, as `pveam download`]).
fn pvesm_free(st: &mut State, ctx: &Ctx, argv: &[String]) -> Output {
    let usage = "pvesm free <volume> [OPTIONS]";
    let schema = [
        p("storage", Ty::StorageId),
        p("delay", Ty::Int(Some(1), Some(30))),
    ];
    let o = match args::parse(argv, &schema) {
        Ok(o) => o,
        Err(e) => return args::param_error(&e, usage),
    };
    if o.pos.len() != 1 {
        let what = if o.pos.is_empty() {
            "not enough"
        } else {
            "too many"
        };
        return Output::err(&format!("400 {what} arguments\n{usage}"), 255);
    }
    match storage_ops::free(st, ctx, &o.pos[0], o.get("storage")) {
        Ok(run) => {
            let mut out = cli_task_output(&run);
            out.code = 0;
            out
        }
        Err(f) => {
            let mut out = Output::from(f);
            if out.stderr.starts_with("400 ") {
                out.stderr.push_str(&format!("\n{usage}\n"));
            }
            out
        }
    }
}

/// `ha-manager status` (FORMATS §3.13, §6: the PVE 9.1 layout of the REAL
/// `ha_manager_status_pve9.2_fencing_crs.txt` without 9.2's CRS suffix): quorum, the CRM master,
/// the fencing line, one `lrm` line per node (`active, watchdog active` on nodes with HA
/// services, else `idle, watchdog standby`) and one `service vm:<id> (<node>, <state>)` line per
/// HA resource. Times are Perl scalar `localtime` (day space-padded). With no HA resource only
/// the quorum line and an idle master remain.
pub fn ha_manager(st: &mut State, ctx: &Ctx, argv: &[String]) -> Output {
    match argv.first().map(String::as_str) {
        Some("status") => {
            let master = st.local_node.clone();
            let services: Vec<(String, String, &'static str)> = st
                .guests
                .values()
                .filter_map(|g| {
                    let ha = g.ha.as_ref()?;
                    let kind = if g.kind == crate::state::Kind::Qemu {
                        "vm"
                    } else {
                        "ct"
                    };
                    Some((
                        format!("{kind}:{}", g.vmid),
                        g.node.clone(),
                        ha.service_state(),
                    ))
                })
                .collect();
            if services.is_empty() {
                return Output::ok(format!(
                    "quorum OK\nmaster {master} (idle, {})\n",
                    timefmt::ctime(ctx.now - 7)
                ));
            }
            let mut s = format!(
                "quorum OK\nmaster {master} (active, {})\nfencing armed (CRM watchdog active)\n",
                timefmt::ctime(ctx.now - 3)
            );
            for (i, n) in st.nodes.iter().enumerate() {
                let state = if services.iter().any(|(_, node, _)| *node == n.name) {
                    "active, watchdog active"
                } else {
                    "idle, watchdog standby"
                };
                s.push_str(&format!(
                    "lrm {} ({state}, {})\n",
                    n.name,
                    timefmt::ctime(ctx.now - 1 - i as i64)
                ));
            }
            for (sid, node, state) in services {
                s.push_str(&format!("service {sid} ({node}, {state})\n"));
            }
            Output::ok(s)
        }
        Some(c) => Output::err(
            &format!(
                "unknown command 'ha-manager {c}'\nUSAGE: ha-manager <COMMAND> [ARGS] [OPTIONS]"
            ),
            255,
        ),
        None => Output::err(
            "ERROR: no command specified\nUSAGE: ha-manager <COMMAND> [ARGS] [OPTIONS]",
            255,
        ),
    }
}

/// `pvecm status|nodes` (FORMATS §3.14; REAL `pvecm_status_pve9.1_2node_local1.txt` byte-exact,
/// trailing spaces included, and `pvecm_nodes_pve9.2_3node.txt`).
pub fn pvecm(st: &mut State, ctx: &Ctx, argv: &[String]) -> Output {
    let n = st.nodes.len();
    let online = st.nodes.iter().filter(|x| x.online).count();
    let local = st.node(&st.local_node).cloned();
    let local_id = local.as_ref().map_or(1, |l| l.nodeid);
    match argv.first().map(String::as_str) {
        Some("status") => {
            let mut s = String::new();
            s.push_str("Cluster information\n-------------------\n");
            s.push_str(&format!("{:<17} {}\n", "Name:", st.cluster));
            s.push_str(&format!(
                "{:<17} {}\n",
                "Config Version:", st.config_version
            ));
            s.push_str(&format!("{:<17} {}\n", "Transport:", "knet"));
            s.push_str(&format!("{:<17} {}\n", "Secure auth:", "on"));
            s.push('\n');
            s.push_str("Quorum information\n------------------\n");
            s.push_str(&format!("Date:             {}\n", timefmt::ctime(ctx.now)));
            s.push_str("Quorum provider:  corosync_votequorum\n");
            s.push_str(&format!("Nodes:            {online}\n"));
            s.push_str(&format!("Node ID:          0x{local_id:08x}\n"));
            s.push_str("Ring ID:          1.1d\n");
            s.push_str("Quorate:          Yes\n\n");
            s.push_str("Votequorum information\n----------------------\n");
            s.push_str(&format!("Expected votes:   {n}\n"));
            s.push_str(&format!("Highest expected: {n}\n"));
            s.push_str(&format!("Total votes:      {online}\n"));
            s.push_str(&format!("Quorum:           {}  \n", n / 2 + 1));
            s.push_str("Flags:            Quorate \n\n");
            s.push_str("Membership information\n----------------------\n");
            s.push_str("    Nodeid      Votes Name\n");
            for node in st.nodes.iter().filter(|x| x.online) {
                let me = if node.name == st.local_node {
                    " (local)"
                } else {
                    ""
                };
                s.push_str(&format!(
                    "0x{:08x}          1 {}{me}\n",
                    node.nodeid, node.ip
                ));
            }
            Output::ok(s)
        }
        Some("nodes") => {
            let mut s = String::from(
                "\nMembership information\n----------------------\n    Nodeid      Votes Name\n",
            );
            for node in st.nodes.iter().filter(|x| x.online) {
                let me = if node.name == st.local_node {
                    " (local)"
                } else {
                    ""
                };
                s.push_str(&format!(
                    "{:>10} {:>10} {}{me}\n",
                    node.nodeid, 1, node.name
                ));
            }
            Output::ok(s)
        }
        Some(c) => Output::err(
            &format!("unknown command 'pvecm {c}'\nUSAGE: pvecm <COMMAND> [ARGS] [OPTIONS]"),
            255,
        ),
        None => Output::err(
            "ERROR: no command specified\nUSAGE: pvecm <COMMAND> [ARGS] [OPTIONS]",
            255,
        ),
    }
}
