//! Who wrote a message, when the file does not say: the one rule
//! (`Message::role_with_models`, `model::is_model_name`) every face and
//! every provider request uses.

use wo_format::model::is_model_name;
use wo_format::{Message, Role, Timestamp};

const NONE: &[&str] = &[];

#[test]
fn names_other_tools_write_for_models_are_models() {
    for name in [
        "gpt-4o",
        "GPT-4o-mini",
        "gpt-3.5-turbo",
        "o3-mini",
        "claude-sonnet-4.5",
        "claude-3-5-sonnet-20241022",
        "llama3.1:8b",
        "Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-8B",
        "SmolLM2",
        "smollm2-360m-instruct",
        "HuggingFaceTB/SmolLM2-1.7B",
        "mistral-large-latest",
        "qwen2.5-coder:7b",
        "deepseek-r1",
        "gemini-2.0-flash",
        "phi3",
        "mixtral-8x7b",
        "mybot:7b",
        "finetune-13B",
        "assistant",
    ] {
        assert!(is_model_name(name, NONE), "{name}");
    }
}

#[test]
fn people_are_not_models() {
    for name in [
        "alec",
        "Claude",
        "claude",
        "Claude Monet",
        "Gemma",
        "phil",
        "Yiannis",
        "orcaman",
        "gpt",
        "o3",
        "llama lover 3",
        "",
        "  ",
        "team",
        "bob-2fa",
    ] {
        assert!(!is_model_name(name, NONE), "{name:?}");
    }
}

#[test]
fn configured_model_names_count_whatever_they_look_like() {
    let known = ["kiln-helper", "openrouter/Mistral"];
    assert!(is_model_name("Kiln-Helper", &known));
    assert!(is_model_name("mistral", &known));
    assert!(is_model_name("other/mistral", &known));
    assert!(!is_model_name("alec", &known));
    assert!(!is_model_name("", &[""]));
}

#[test]
fn role_inference_order() {
    let m = |user: &str| Message::new(user, Timestamp::from_unix(1_800_000_000), "t", "<p>x</p>");
    assert_eq!(m("gpt-4o").effective_role(), Role::Assistant);
    assert_eq!(m("llama3.1:8b").effective_role(), Role::Assistant);
    assert_eq!(m("alec").effective_role(), Role::User);
    assert_eq!(m("system").effective_role(), Role::System);
    assert_eq!(m("kiln-helper").effective_role(), Role::User);
    assert_eq!(
        m("kiln-helper").role_with_models(&["kiln-helper".to_owned()]),
        Role::Assistant
    );
    // An explicit role always wins, both ways.
    let mut user_named_like_a_model = m("gpt-4o");
    user_named_like_a_model.role = Some(Role::User);
    assert_eq!(user_named_like_a_model.effective_role(), Role::User);
    let mut assistant = m("alec");
    assistant.role = Some(Role::Assistant);
    assert_eq!(assistant.role_with_models(NONE), Role::Assistant);
    // Provider metadata marks an answer too.
    let mut with_model = m("alec");
    with_model.model = Some("x".into());
    assert_eq!(with_model.effective_role(), Role::Assistant);
}

#[test]
fn an_explicit_role_in_the_file_is_read() {
    let doc = br#"{"version":1,"schema":"https://wikioracle.org/schemas/llm_state_v1.json","date":"2026-01-01T00:00:00Z","context":"","messages":[
        {"title":"q","username":"gpt-4o","timestamp":"2026-01-01T00:00:00Z","content":"<p>q</p>","role":"user"},
        {"title":"a","username":"helper","timestamp":"2026-01-01T00:00:01Z","content":"<p>a</p>","role":"assistant"}],
        "truth":{"trust":[]}}"#;
    let s = wo_format::parse(doc).unwrap();
    let roles: Vec<Role> = s.messages().iter().map(Message::effective_role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
}
