//! The cluster's backup jobs (`/etc/pve/jobs.cfg`, type `vzdump`) as PVE's API keeps them, and
//! the resource pools a job may name. Only the configuration: the simulator has no scheduler,
//! so a job never runs by itself.
//!
//! Texts and checks: pve-manager 14a22df3 `PVE/API2/Backup.pm` (`index`: the jobs in their
//! order, each with `id`, `type` and `next-run`; `create_job`: "Job 'ID' already exists",
//! `enabled` 1 unless given, `$schedule_param_check`'s "neither 'starttime' nor 'schedule'
//! were set"; `read_job` and `delete_job`: "No such job 'ID'" on `id`), `PVE/VZDump.pm`
//! `verify_vzdump_parameters` ("option conflicts with option 'vmid'" on `pool`, `all`,
//! `exclude`; "property is missing" on `vmid` without `all`, `stop` or `pool`); the pool check
//! (`check_pool_exist`, a permission error). `prune-backups` is kept parsed, as GET returns an
//! object (PVE 9.2 schema). `next-run` is the next full hour: the simulator does not evaluate
//! calendar events, so it is the right shape, not PVE's time.

use serde_json::{Map, Value, json};

use crate::args::Parsed;
use crate::state::State;
use crate::storage_ops::{param_exc, parse_keep};
use crate::{Ctx, Failure};

/// `GET /cluster/backup`.
pub fn list(st: &State, ctx: &Ctx) -> Value {
    Value::Array(
        st.backup_jobs
            .iter()
            .map(|j| {
                let mut v = j.clone();
                if v.get("schedule").is_some() {
                    v.insert("next-run".into(), json!(ctx.now - ctx.now % 3600 + 3600));
                }
                Value::Object(v)
            })
            .collect(),
    )
}

fn find<'a>(st: &'a State, id: &str) -> Result<&'a Map<String, Value>, Failure> {
    st.backup_jobs
        .iter()
        .find(|j| j["id"] == id)
        .ok_or_else(|| param_exc("id", &format!("No such job '{id}'")))
}

/// `GET /cluster/backup/{id}`.
pub fn read(st: &State, id: &str) -> Result<Value, Failure> {
    find(st, id).map(|j| Value::Object(j.clone()))
}

/// `DELETE /cluster/backup/{id}`.
pub fn delete(st: &mut State, id: &str) -> Result<(), Failure> {
    find(st, id)?;
    st.backup_jobs.retain(|j| j["id"] != id);
    Ok(())
}

/// `POST /cluster/backup`.
pub fn create(st: &mut State, o: &Parsed) -> Result<(), Failure> {
    if let Some(pool) = o.get("pool").filter(|p| !st.pools.contains_key(*p)) {
        return Err(Failure::die(format!(
            "403 Permission check failed (pool '{pool}' does not exist)\n"
        )));
    }
    if o.get("schedule").is_none() && o.get("starttime").is_none() {
        return Err(param_exc(
            "schedule",
            "neither 'starttime' nor 'schedule' were set",
        ));
    }
    let id = o.get("id").unwrap_or_default().to_string();
    if st.backup_jobs.iter().any(|j| j["id"] == id.as_str()) {
        return Err(Failure::die(format!("Job '{id}' already exists\n")));
    }
    for other in ["all", "exclude", "pool"] {
        if o.get(other).is_some_and(|v| v != "0") && o.get("vmid").is_some() {
            return Err(param_exc(other, "option conflicts with option 'vmid'"));
        }
    }
    let mut job = Map::new();
    job.insert("id".into(), json!(id));
    job.insert("type".into(), json!("vzdump"));
    job.insert("enabled".into(), json!(1));
    for (k, v) in &o.opts {
        // `--output-format` is pvesh's own option, not the API's.
        if k == "id" || k == "output-format" {
            continue;
        }
        let value = match k.as_str() {
            "prune-backups" => {
                let keep = parse_keep(v)?;
                let mut m: Map<String, Value> = keep
                    .counts
                    .iter()
                    .map(|(k, n)| (k.clone(), json!(n)))
                    .collect();
                if keep.all {
                    m.insert("keep-all".into(), json!(1));
                }
                Value::Object(m)
            }
            "enabled" | "all" | "remove" | "protected" | "quiet" | "stop" | "stdexcludes"
            | "repeat-missed" | "bwlimit" | "ionice" | "lockwait" | "stopwait" | "pigz"
            | "zstd" => v.parse::<i64>().map_or_else(|_| json!(v), |n| json!(n)),
            _ => json!(v),
        };
        job.insert(k.clone(), value);
    }
    if job.get("vmid").is_none()
        && job.get("pool").is_none()
        && job.get("all").is_none_or(|a| a == 0)
    {
        return Err(param_exc("vmid", "property is missing"));
    }
    st.backup_jobs.push(job);
    Ok(())
}
