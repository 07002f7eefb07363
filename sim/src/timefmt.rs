//! Node-local time formatting used by the printouts (PVE formats with Perl `localtime`/`strftime`
//! in the node's zone; the test bed's zone is whatever the machine has, usually UTC).

use chrono::{DateTime, Local, NaiveTime, TimeZone};

/// Current time, epoch seconds.
pub fn now() -> i64 {
    Local::now().timestamp()
}

fn local(t: i64) -> DateTime<Local> {
    Local
        .timestamp_opt(t, 0)
        .single()
        .unwrap_or_else(|| Local.timestamp_opt(0, 0).unwrap())
}

/// `YYYY_MM_DD-HH_MM_SS`, the time stamp inside vzdump archive names (FORMATS §3.10).
pub fn archive_stamp(t: i64) -> String {
    local(t).format("%Y_%m_%d-%H_%M_%S").to_string()
}

/// `YYYY-MM-DD HH:MM:SS` (`strftime("%F %H:%M:%S")`, qm listsnapshot and vzdump log lines).
pub fn iso(t: i64) -> String {
    local(t).format("%Y-%m-%d %H:%M:%S").to_string()
}

/// Perl scalar `localtime`: `Wed Feb  7 13:30:06 2024` (day space-padded; FORMATS §3.13).
pub fn ctime(t: i64) -> String {
    local(t).format("%a %b %e %H:%M:%S %Y").to_string()
}

/// Local midnight at or before `t`.
pub fn local_midnight_before(t: i64) -> i64 {
    let d = local(t).date_naive().and_time(NaiveTime::MIN);
    Local
        .from_local_datetime(&d)
        .earliest()
        .map(|d| d.timestamp())
        .unwrap_or(t - t.rem_euclid(86_400))
}

/// `HH:MM:SS` of a duration (vzdump `Finished Backup of VM 100 (00:00:19)`).
pub fn hms(secs: i64) -> String {
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}
