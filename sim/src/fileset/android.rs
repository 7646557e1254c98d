//! An Android-like file set for the `android-launch` scenario: for each of 18 apps an APK with
//! native libraries and compiled code under `data/app/<package>/`, and private data (databases,
//! shared preferences, files, cache) under `data/data/<package>/`; plus `data/system/` for the
//! services that run alongside. Sizes are drawn from a seeded PRNG (log-uniform, so they span
//! orders of magnitude as real app data does). The RFC's phone data set is not public: this is
//! a stand-in with the same kinds of node blocks (inodes of small and large files, inline data,
//! direct nodes of large files).
use super::{Content, Manifest, ManifestEntry};
use crate::rng::Rng;

/// Packages from the RFC's categories: messaging, short video, shopping, social media,
/// browser, video.
pub const APP_PACKAGES: [&str; 18] = [
    "com.tencent.mm",
    "com.whatsapp",
    "org.telegram.messenger",
    "com.ss.android.ugc.aweme",
    "com.zhiliaoapp.musically",
    "com.smile.gifmaker",
    "com.taobao.taobao",
    "com.jingdong.app.mall",
    "com.xunmeng.pinduoduo",
    "com.sina.weibo",
    "com.xingin.xhs",
    "com.instagram.android",
    "com.android.chrome",
    "com.UCMobile",
    "org.mozilla.firefox",
    "tv.danmaku.bili",
    "com.google.android.youtube",
    "com.tencent.qqlive",
];

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AndroidFileSet {
    pub seed: u64,
    /// Files under `data/system/`, used by the system services.
    pub system_files: u32,
}

impl Default for AndroidFileSet {
    fn default() -> AndroidFileSet {
        AndroidFileSet {
            seed: 0x5eed_a9d0,
            system_files: 600,
        }
    }
}

const IMAGE_BYTES: u64 = 2 << 30;

pub fn app_code_dir(package: &str) -> String {
    format!("data/app/{package}/")
}

pub fn app_data_dir(package: &str) -> String {
    format!("data/data/{package}/")
}

pub const SYSTEM_DIR: &str = "data/system/";

/// The uid of the app at `index` of [`APP_PACKAGES`] (user 0): app ids from 10050 on, spaced
/// as installs over time would leave them.
pub fn app_uid(index: usize) -> u32 {
    10_000 + index as u32 * 7 + 50
}

struct Builder {
    entries: Vec<ManifestEntry>,
    rng: Rng,
}

impl Builder {
    fn dir(&mut self, path: String) {
        self.entries.push(ManifestEntry {
            path,
            content: Content::Dir,
        });
    }

    fn zeros(&mut self, path: String, low: u64, high: u64) {
        let blocks = self.rng.log_range(low, high) as u32;
        self.entries.push(ManifestEntry {
            path,
            content: Content::Zeros { blocks },
        });
    }

    fn random(&mut self, path: String, low: u64, high: u64) {
        let len = self.rng.log_range(low, high);
        let seed = self.rng.next_u64();
        self.entries.push(ManifestEntry {
            path,
            content: Content::Random { len, seed },
        });
    }

    fn hex_name(&mut self) -> String {
        format!("{:016x}", self.rng.next_u64())
    }

    fn prefs_xml(&mut self) -> String {
        let mut xml =
            String::from("<?xml version='1.0' encoding='utf-8' standalone='yes' ?>\n<map>\n");
        for key in 0..self.rng.range(4, 60) {
            let value = self.rng.next_u64();
            match key % 3 {
                0 => xml.push_str(&format!(
                    "    <string name=\"key_{key}\">{value:x}</string>\n"
                )),
                1 => xml.push_str(&format!(
                    "    <long name=\"ts_{key}\" value=\"{}\" />\n",
                    value % 10_000_000_000_000
                )),
                _ => xml.push_str(&format!(
                    "    <boolean name=\"flag_{key}\" value=\"{}\" />\n",
                    value.is_multiple_of(2)
                )),
            }
        }
        xml.push_str("</map>\n");
        xml
    }

    fn app(&mut self, package: &str) {
        let code = app_code_dir(package);
        self.dir(code.clone());
        self.zeros(format!("{code}base.apk"), 900, 3000);
        self.dir(format!("{code}lib/arm64"));
        for lib in 0..self.rng.range(3, 10) {
            self.zeros(format!("{code}lib/arm64/lib{lib}.so"), 4, 512);
        }
        self.dir(format!("{code}oat/arm64"));
        self.zeros(format!("{code}oat/arm64/base.odex"), 64, 1200);
        self.zeros(format!("{code}oat/arm64/base.vdex"), 32, 512);
        self.zeros(format!("{code}oat/arm64/base.art"), 16, 128);

        let data = app_data_dir(package);
        self.dir(data.clone());
        self.dir(format!("{data}databases"));
        for db in 0..self.rng.range(4, 14) {
            self.zeros(format!("{data}databases/db{db}.db"), 4, 256);
            self.zeros(format!("{data}databases/db{db}.db-wal"), 1, 64);
            self.zeros(format!("{data}databases/db{db}.db-shm"), 8, 9);
        }
        self.dir(format!("{data}shared_prefs"));
        for pref in 0..self.rng.range(8, 40) {
            let xml = self.prefs_xml();
            self.entries.push(ManifestEntry {
                path: format!("{data}shared_prefs/pref{pref}.xml"),
                content: Content::Text(xml),
            });
        }
        self.dir(format!("{data}files"));
        for _ in 0..self.rng.range(100, 500) {
            let name = self.hex_name();
            self.random(format!("{data}files/{name}"), 64, 8192);
        }
        self.dir(format!("{data}cache"));
        for bucket in 0..16 {
            self.dir(format!("{data}cache/{bucket:02x}"));
            for _ in 0..self.rng.range(10, 45) {
                let name = self.hex_name();
                self.random(format!("{data}cache/{bucket:02x}/{name}"), 512, 32768);
            }
        }
    }
}

impl AndroidFileSet {
    pub fn manifest(&self) -> Manifest {
        let mut builder = Builder {
            entries: Vec::new(),
            rng: Rng::new(self.seed),
        };
        builder.dir("data".into());
        builder.dir("data/app".into());
        builder.dir("data/data".into());
        builder.dir(SYSTEM_DIR.trim_end_matches('/').into());
        for index in 0..self.system_files {
            builder.random(format!("{SYSTEM_DIR}state{index}"), 128, 32768);
        }
        for package in APP_PACKAGES {
            builder.app(package);
        }
        Manifest {
            name: "android-launch".into(),
            entries: builder.entries,
            image_bytes: IMAGE_BYTES,
        }
    }
}
