//! The helper against a real file system (a temporary directory): what lands, and that every
//! refusal leaves the directory as it was.

use std::io::Read;
use std::path::Path;

use super::*;

fn sha(data: &[u8]) -> String {
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn req(name: &str, data: &[u8]) -> Request {
    Request {
        max_used: 99,
        storage: "local".into(),
        name: name.into(),
        size: data.len() as u64,
        sha256: sha(data),
    }
}

/// The directory's entries with their contents, hidden ones included.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let p = e.path();
            let data = if p.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                Vec::new()
            };
            (e.file_name().to_string_lossy().into_owned(), data)
        })
        .collect();
    v.sort();
    v
}

fn iso_dir() -> (tempfile::TempDir, String) {
    let t = tempfile::tempdir().unwrap();
    let iso = t.path().join("template/iso");
    std::fs::create_dir_all(&iso).unwrap();
    let shown = iso.to_string_lossy().into_owned();
    (t, shown)
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

const SHA: &str = "0e2c6b1c3ad7c4d1b3f3c1f0a2b5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7";

#[test]
fn the_command_line_is_exactly_one_shape() {
    let good = args(&[
        "iso-receive",
        "--max-used",
        "90",
        "local",
        "debian-13.iso",
        "1024",
        SHA,
    ]);
    let r = parse_args(&good).unwrap();
    assert_eq!(
        (r.max_used, r.size, r.name.as_str()),
        (90, 1024, "debian-13.iso")
    );
    // One word changed at a time: each position with what its rule refuses.
    let changed: &[(usize, &str)] = &[
        (0, "iso-send"),
        (1, "--max-use"),
        (2, "100"),
        (2, "090"),
        (3, "Local"),
        (4, "../x.iso"),
        (4, "a/b.iso"),
        (4, ".hidden.iso"),
        (4, "x..iso"),
        (4, "image.qcow2"),
        (4, ".iso"),
        (5, "1G"),
        (5, "0"),
        (5, "01024"),
        (5, "-1"),
        (5, "1099511627777"),
        (6, "ABCDEF"),
    ];
    let mut bad: Vec<Vec<String>> = changed
        .iter()
        .map(|(i, w)| {
            let mut a = good.clone();
            a[*i] = w.to_string();
            a
        })
        .collect();
    bad.push(good[..6].to_vec());
    bad.push([good.clone(), vec!["x".to_string()]].concat());
    for b in &bad {
        let e = parse_args(b).unwrap_err();
        assert_eq!(e.code(), 2, "{b:?}: {e:?}");
    }
    let upper = SHA.to_ascii_uppercase();
    let e = parse_args(&args(&[
        "iso-receive",
        "--max-used",
        "90",
        "local",
        "a.iso",
        "1",
        &upper,
    ]));
    assert_eq!(e.unwrap_err().code(), 2);
}

#[test]
fn only_a_directory_storage_with_iso_content_is_taken() {
    let ok = serde_json::json!({"type":"dir","path":"/var/lib/vz","content":"vztmpl,iso,backup"});
    assert_eq!(
        storage_from_config("local", &ok).unwrap().path,
        "/var/lib/vz"
    );
    let nfs =
        serde_json::json!({"type":"nfs","path":"/mnt/pve/nas","content":"iso","server":"10.0.0.2"});
    assert!(storage_from_config("nas", &nfs).is_ok());
    for (cfg, why) in [
        (
            serde_json::json!({"type":"lvmthin","thinpool":"data","vgname":"pve","content":"images,rootdir"}),
            "not a directory storage",
        ),
        (
            serde_json::json!({"type":"dir","path":"/srv/b","content":"backup"}),
            "does not hold iso content",
        ),
        (
            serde_json::json!({"type":"dir","path":"/srv/b","content":"iso","disable":1}),
            "disabled",
        ),
        (
            serde_json::json!({"type":"dir","path":"srv","content":"iso"}),
            "no absolute path",
        ),
    ] {
        let e = storage_from_config("s1", &cfg).unwrap_err();
        assert_eq!(e.code(), 3, "{cfg}");
        assert!(e.message().contains(why), "{}", e.message());
    }
}

#[test]
fn exact_bytes_land_readable_under_their_name() {
    let (_t, shown) = iso_dir();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let dir = open_dir_nofollow(&shown).unwrap();
    receive(
        &req("debian.iso", &data),
        &dir,
        &shown,
        &mut data.as_slice(),
    )
    .unwrap();
    let got = Path::new(&shown).join("debian.iso");
    assert_eq!(std::fs::read(&got).unwrap(), data);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&got).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert_eq!(listing(Path::new(&shown)).len(), 1, "nothing else is left");
}

#[test]
fn what_did_not_arrive_as_declared_leaves_nothing() {
    let (_t, shown) = iso_dir();
    std::fs::write(Path::new(&shown).join("other.iso"), b"kept").unwrap();
    let before = listing(Path::new(&shown));
    let data = b"an image of some bytes".to_vec();
    let dir = open_dir_nofollow(&shown).unwrap();
    let mut wrong_sum = req("a.iso", &data);
    wrong_sum.sha256 = sha(b"something else");
    let mut short = req("a.iso", &data);
    short.size += 1;
    let mut long = req("a.iso", &data);
    long.size -= 1;
    for (r, code, why) in [
        (wrong_sum, 4, "SHA-256"),
        (short, 4, "ended early"),
        (long, 4, "more than the declared"),
    ] {
        let e = receive(&r, &dir, &shown, &mut data.as_slice()).unwrap_err();
        assert_eq!(e.code(), code, "{e:?}");
        assert!(e.message().contains(why), "{}", e.message());
        assert_eq!(listing(Path::new(&shown)), before);
    }
}

#[test]
fn an_existing_name_is_never_overwritten() {
    let (_t, shown) = iso_dir();
    let target = Path::new(&shown).join("a.iso");
    std::fs::write(&target, b"the old one").unwrap();
    let data = b"new".to_vec();
    let dir = open_dir_nofollow(&shown).unwrap();
    let e = receive(&req("a.iso", &data), &dir, &shown, &mut data.as_slice()).unwrap_err();
    assert_eq!(e.code(), 5);
    assert_eq!(std::fs::read(&target).unwrap(), b"the old one");
    // A symlink of that name counts as there (and is not followed).
    std::os::unix::fs::symlink("/etc/passwd", Path::new(&shown).join("b.iso")).unwrap();
    let e = receive(&req("b.iso", &data), &dir, &shown, &mut data.as_slice()).unwrap_err();
    assert_eq!(e.code(), 5);
}

/// A reader that plants the target name when its data is spent: the name appears while the
/// image arrives.
struct Planting<'a> {
    data: &'a [u8],
    plant: std::path::PathBuf,
}

impl Read for Planting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.data.is_empty() {
            if !self.plant.exists() {
                std::fs::write(&self.plant, b"planted").unwrap();
            }
            return Ok(0);
        }
        let n = self.data.read(buf)?;
        Ok(n)
    }
}

#[test]
fn a_name_that_appears_meanwhile_wins() {
    let (_t, shown) = iso_dir();
    let data = b"the image".to_vec();
    let dir = open_dir_nofollow(&shown).unwrap();
    let plant = Path::new(&shown).join("race.iso");
    let mut input = Planting {
        data: &data,
        plant: plant.clone(),
    };
    let e = receive(&req("race.iso", &data), &dir, &shown, &mut input).unwrap_err();
    assert_eq!(e.code(), 5, "{e:?}");
    assert!(e.message().contains("appeared"), "{}", e.message());
    assert_eq!(std::fs::read(&plant).unwrap(), b"planted");
    assert_eq!(listing(Path::new(&shown)).len(), 1);
}

#[test]
fn a_symlink_on_the_way_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let real = t.path().join("real/template/iso");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(t.path().join("real"), t.path().join("link")).unwrap();
    let via = t.path().join("link/template/iso");
    let e = open_dir_nofollow(&via.to_string_lossy()).unwrap_err();
    assert_eq!(e.code(), 3);
    assert!(e.message().contains("symlink"), "{}", e.message());
    // template/iso itself a symlink.
    let t2 = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t2.path().join("template")).unwrap();
    std::os::unix::fs::symlink(&real, t2.path().join("template/iso")).unwrap();
    let e = open_dir_nofollow(&t2.path().join("template/iso").to_string_lossy()).unwrap_err();
    assert_eq!(e.code(), 3);
    assert!(open_dir_nofollow(&real.to_string_lossy()).is_ok());
}

#[test]
fn an_image_that_would_fill_the_disk_is_refused_with_the_numbers() {
    let (_t, shown) = iso_dir();
    let dir = open_dir_nofollow(&shown).unwrap();
    let (_, _, total) = fill_after(&dir, 0).unwrap();
    let mut r = req("big.iso", b"x");
    r.size = total;
    r.max_used = 90;
    let e = receive(&r, &dir, &shown, &mut (&b"x"[..])).unwrap_err();
    assert_eq!(e.code(), 6);
    let m = e.message();
    assert!(
        m.contains("% full") && m.contains("GiB used of") && m.contains("limit of 90%"),
        "{m}"
    );
    assert!(listing(Path::new(&shown)).is_empty());
}

/// Where a file system has no unnamed files: the named partial file lands the same bytes, and
/// a failure removes it.
#[test]
fn the_named_fallback_lands_exact_bytes_and_leaves_nothing_on_failure() {
    let (_t, shown) = iso_dir();
    let data = b"fallback image".to_vec();
    let dir = open_dir_nofollow(&shown).unwrap();
    let mut bad = req("f.iso", &data);
    bad.sha256 = sha(b"no");
    let e = receive_into(&bad, &dir, &shown, &mut data.as_slice(), false).unwrap_err();
    assert_eq!(e.code(), 4);
    assert!(listing(Path::new(&shown)).is_empty());
    receive_into(
        &req("f.iso", &data),
        &dir,
        &shown,
        &mut data.as_slice(),
        false,
    )
    .unwrap();
    assert_eq!(
        listing(Path::new(&shown)),
        vec![("f.iso".to_string(), data)]
    );
    // A planted partial name is not followed or reused: the upload fails, the plant stays.
    std::os::unix::fs::symlink(
        "/etc/shadow",
        Path::new(&shown).join(".g.iso.pxagent-partial"),
    )
    .unwrap();
    let e = receive_into(&req("g.iso", b"g"), &dir, &shown, &mut &b"g"[..], false).unwrap_err();
    assert_eq!(e.code(), 1, "{e:?}");
    assert!(!Path::new(&shown).join("g.iso").exists());
}
