//! The config file end to end: a real file found through `WO_CONFIG` /
//! `XDG_CONFIG_HOME`, every kind built from it, keys resolved and never
//! shown, and `list_with_reachability` for `wo providers`.

mod common;

use common::{FakeServer, Reply};
use wo_providers::Reachability;
use wo_providers::config::{self, Config, ConfigError, Env, KeyStatus};

#[tokio::test]
async fn a_config_file_builds_every_kind_and_lists_reachability() {
    let nano = FakeServer::start(vec![Reply::json(200, common::NANO_READY)]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg_dir = dir.path().join("wikioracle");
    std::fs::create_dir_all(&cfg_dir).unwrap();
    let text = format!(
        r#"
[defaults]
provider = "nano"
temperature = 0.4
max_tokens = 256
save_path = "~/answers/last.md"

[providers.nano]
kind = "nanochat"
base_url = "{url}"
timeout_secs = 30

[providers.hosted]
kind = "wikioracle"
base_url = "http://127.0.0.1:9"
api_key_env = "WO_TEST_HOSTED_KEY"

[providers.router]
kind = "openai"
base_url = "https://openrouter.example/api/v1"
api_key = "sk-or-file-key-0123456789"
model = "some/model"
context_window = 65536

[providers.claude]
kind = "anthropic"
model = "claude-haiku-4-5"
"#,
        url = nano.url
    );
    let path = cfg_dir.join("config.toml");
    std::fs::write(&path, &text).unwrap();
    let env = Env::from_pairs([
        ("HOME", dir.path().as_os_str().to_owned()),
        ("XDG_CONFIG_HOME", dir.path().as_os_str().to_owned()),
        ("WO_TEST_HOSTED_KEY", "hosted-secret-0123456789".into()),
    ]);
    let cfg = Config::load_with(env).unwrap();
    assert_eq!(cfg.source.as_deref(), Some(path.as_path()));
    assert_eq!(cfg.default_provider(), "nano");
    assert_eq!(cfg.defaults.max_tokens, Some(256));
    assert_eq!(
        cfg.defaults.save_path.as_deref(),
        Some(dir.path().join("answers/last.md").as_path())
    );
    // The file is 0644 here and holds a key: warn.
    assert!(
        cfg.warnings.iter().any(|w| w.contains("chmod 600")),
        "{:?}",
        cfg.warnings
    );

    for name in ["nano", "hosted", "router", "claude", "openai", "anthropic"] {
        let p = config::build(name, &cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.name(), name);
    }
    let router = config::build("router", &cfg).unwrap();
    assert_eq!(router.default_model(), "some/model");
    assert_eq!(router.context_window(), 65536);

    let rows = config::list(&cfg);
    let row = |n: &str| rows.iter().find(|r| r.name == n).unwrap();
    assert_eq!(
        row("hosted").key,
        KeyStatus::FromEnv {
            var: "WO_TEST_HOSTED_KEY".into()
        }
    );
    assert_eq!(row("router").key, KeyStatus::FromConfig);
    assert_eq!(
        row("claude").key,
        KeyStatus::Missing {
            var: Some("ANTHROPIC_API_KEY".into())
        }
    );
    assert!(row("nano").is_default);
    let shown = format!("{rows:?} {cfg:?}");
    assert!(
        !shown.contains("sk-or-file") && !shown.contains("hosted-secret"),
        "{shown}"
    );

    let checked = config::list_with_reachability(&cfg).await;
    let status = |n: &str| checked.iter().find(|(i, _)| i.name == n).unwrap().1.clone();
    assert!(status("nano").is_reachable(), "{}", status("nano"));
    assert!(matches!(status("hosted"), Reachability::Unreachable { .. }));
    assert!(matches!(
        status("claude"),
        Reachability::NotConfigured { .. }
    ));
    assert!(matches!(
        status("openai"),
        Reachability::NotConfigured { .. }
    ));
}

#[test]
fn bad_toml_points_at_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[defaults]\ntemperature = \"hot\"\n").unwrap();
    let e = Config::load_with(Env::from_pairs([("WO_CONFIG", path.as_os_str())])).unwrap_err();
    assert!(matches!(e, ConfigError::Parse { line: 2, .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!("{}:2:", path.display())),
        "{e}"
    );
}

#[cfg(feature = "local")]
#[test]
fn local_without_its_model_explains_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::builtin(Env::from_pairs([("HOME", dir.path().as_os_str())]));
    let e = config::build("local", &cfg).err().unwrap();
    assert_eq!(e.kind(), wo_providers::ErrorKind::Config);
    let msg = e.to_string();
    assert!(msg.contains("scripts/install-model.sh"), "{msg}");
    assert!(
        msg.contains(".local/share/wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        "{msg}"
    );
}
