//! Recording a finished turn: the user and assistant messages it appends,
//! with cheap titles, provenance and `refs` counting (product §1, §7).

use wo_format::title::title_for;
use wo_format::xhtml::{markdown_to_xhtml, question_to_xhtml, to_plain_text};
use wo_format::{ContextUsed, Message, Role, State, Timestamp, Usage};

/// Everything known about a completed exchange.
#[derive(Clone, Debug)]
pub struct CompletedTurn {
    /// Who asked: the user message's `username`.
    pub username: String,
    /// The question as typed (plain text; stored as XHTML).
    pub prompt: String,
    /// The model's answer as it streamed (Markdown, as models write).
    pub answer: String,
    /// `answer` converted to sanitised XHTML ([`answer_xhtml`]). Converted
    /// when the turn is built, before any lock is taken, so that appending
    /// the turn under the store's lock only places ready messages.
    pub answer_xhtml: String,
    /// When the question was sent: the user message's timestamp.
    pub sent_at: Timestamp,
    /// When the answer finished: the assistant message's timestamp.
    pub finished_at: Timestamp,
    /// The provider's name, recorded on the answer.
    pub provider: String,
    /// The model that answered; the answer's `username`.
    pub model: String,
    /// Token counts the provider reported, if any.
    pub usage: Option<Usage>,
    /// The answer's `sources` (truth, recalled messages and chunks sent).
    pub sources: Vec<String>,
    /// What the prompt was made of and what was left out, recorded on the
    /// answer ([`crate::explain::context_used`]); `None`: not recorded.
    pub context_used: Option<ContextUsed>,
    /// The message the prompt follows (branching), if any.
    pub parent: Option<String>,
    /// The prompt starts a new conversation (stored marked as its root;
    /// `parent` is then `None`).
    pub new_conversation: bool,
    /// Another answer to this stored question (regenerate): only the answer
    /// is appended, a sibling of the question's earlier answers. When the
    /// question is gone by the commit, the prompt is appended as a question
    /// after `parent`, as for any turn.
    pub question: Option<String>,
    /// Archive entries with `expires` unused for this many days, at the
    /// turn's time ([`crate::archive::archive_unused`]); `None`: never.
    pub archive_after_days: Option<u32>,
}

impl CompletedTurn {
    /// `username` asked `prompt` at `sent_at`; `model` of `provider`
    /// answered `answer` at `finished_at` — no usage, sources or parent,
    /// continuing the conversation, no archiving. Set what differs with
    /// struct update syntax.
    pub fn new(
        username: impl Into<String>,
        prompt: impl Into<String>,
        answer: impl Into<String>,
        (provider, model): (&str, &str),
        (sent_at, finished_at): (Timestamp, Timestamp),
    ) -> CompletedTurn {
        let answer = answer.into();
        CompletedTurn {
            username: username.into(),
            prompt: prompt.into(),
            answer_xhtml: answer_xhtml(&answer),
            answer,
            sent_at,
            finished_at,
            provider: provider.to_owned(),
            model: model.to_owned(),
            usage: None,
            sources: Vec::new(),
            context_used: None,
            parent: None,
            new_conversation: false,
            question: None,
            archive_after_days: None,
        }
    }
}

/// A model's Markdown answer as the sanitised XHTML a message stores. Linear
/// in the answer's length whatever its nesting; still, call it before taking
/// the store's lock (as `chat::completed_turn` does).
pub fn answer_xhtml(answer: &str) -> String {
    markdown_to_xhtml(answer)
}

/// The two messages a completed turn appends: the user's prompt (plain text,
/// escaped) and the assistant's answer (already converted, in
/// `answer_xhtml`).
/// The answer is dated at least one second after the prompt so the
/// transcript's (timestamp, id) order keeps question before answer.
pub fn turn_messages(turn: &CompletedTurn) -> (Message, Message) {
    let mut user = Message::new(
        turn.username.clone(),
        turn.sent_at.clone(),
        title_for(&turn.prompt),
        question_to_xhtml(&turn.prompt),
    );
    user.role = Some(Role::User);
    user.parent = turn.parent.clone();
    // wo never writes an unlinked message: a question with no parent (the
    // first of a file, New chat, a client's new thread) starts a
    // conversation explicitly, so no later import or merge of older
    // messages can take it into theirs.
    if user.parent.is_none() {
        user.mark_new_conversation();
    }
    let answered_at = if turn.finished_at > turn.sent_at {
        turn.finished_at.clone()
    } else {
        turn.sent_at.next_micro()
    };
    let content = turn.answer_xhtml.clone();
    let mut assistant = Message::new(
        turn.model.clone(),
        answered_at,
        title_for(&to_plain_text(&content)),
        content,
    );
    assistant.role = Some(Role::Assistant);
    assistant.parent = Some(user.id.clone());
    assistant.provider = Some(turn.provider.clone());
    assistant.model = Some(turn.model.clone());
    assistant.usage = turn.usage.clone();
    assistant.sources = Some(turn.sources.clone());
    if let Some(used) = &turn.context_used {
        assistant.set_context_used(used);
    }
    (user, assistant)
}

/// Appends a completed turn to `state` and counts each truth entry it used.
/// Returns the ids of the user and assistant messages.
pub fn apply_turn(state: &mut State, turn: &CompletedTurn) -> (String, String) {
    // A turn looks up several ids (its question or parent, that its new
    // ids are free) and appends two messages: with the state's id links
    // built (kept after, extended by each append) each is one look-up. A
    // one-shot run's prompt walk has built them already; a server's writer
    // state would otherwise scan its 100k ids five times a turn.
    state.index_ids();
    let (mut user, mut assistant) = turn_messages(turn);
    let asked = turn
        .question
        .as_deref()
        .and_then(|q| state.message(q))
        .map(|q| (q.id.clone(), q.timestamp.clone()));
    if let Some((question, asked_at)) = asked {
        // Regenerate: a sibling answer to the stored question.
        assistant.parent = Some(question.clone());
        if assistant.timestamp <= asked_at {
            assistant.timestamp = asked_at.next_micro();
            rederive_id(&mut assistant);
        }
        make_unique(state, &mut assistant);
        let id = assistant.id.clone();
        state.push_message(assistant);
        count_uses(state, turn);
        return (question, id);
    }
    // Ids hash (username, timestamp, content), so the same short answer
    // twice at one instant would collide with the first and be dropped as a
    // duplicate. Move a colliding message on by a microsecond — never by
    // seconds, which dated messages in the future under concurrent asks.
    // A reply is never dated before (or at) the message it follows, or the
    // transcript would sort an exchange by id, not by turn.
    if let Some(parent) = user.parent.as_deref().and_then(|p| state.message(p))
        && parent.timestamp >= user.timestamp
    {
        user.timestamp = parent.timestamp.next_micro();
        rederive_id(&mut user);
    }
    make_unique(state, &mut user);
    assistant.parent = Some(user.id.clone());
    if assistant.timestamp <= user.timestamp {
        assistant.timestamp = user.timestamp.next_micro();
        rederive_id(&mut assistant);
    }
    make_unique(state, &mut assistant);
    let ids = (user.id.clone(), assistant.id.clone());
    state.push_message(user);
    state.push_message(assistant);
    count_uses(state, turn);
    ids
}

/// Each entry sent counts the use and its time ("used" is what keeps an
/// expiring entry from being archived); then archiving at the turn's clock.
fn count_uses(state: &mut State, turn: &CompletedTurn) {
    // A set: thousands of entries, each looked up among the turn's sources.
    let sent: std::collections::HashSet<&str> = turn.sources.iter().map(String::as_str).collect();
    for entry in &mut state.truth.trust {
        if sent.contains(entry.id.as_str()) {
            entry.refs = Some(entry.refs.unwrap_or(0) + 1);
            entry.used = Some(turn.sent_at.clone());
        }
    }
    if let Some(days) = turn.archive_after_days {
        crate::archive::archive_unused(state, &turn.sent_at, days);
    }
}

fn rederive_id(m: &mut Message) {
    m.id = wo_format::ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
}

fn make_unique(state: &State, m: &mut Message) {
    while state.message(&m.id).is_some() {
        m.timestamp = m.timestamp.next_micro();
        rederive_id(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appending_a_turn_does_not_convert_the_answer() {
        // The conversion belongs before the lock: `apply_turn` (run inside
        // the store's transaction) stores the XHTML the turn carries.
        let mut state = State::new(Timestamp::from_unix(1_800_000_000));
        let answer = format!("{}deep", "> ".repeat(10_000));
        let turn = CompletedTurn {
            username: "u".into(),
            prompt: "q".into(),
            answer: answer.clone(),
            answer_xhtml: "<p>converted earlier</p>".into(),
            sent_at: Timestamp::from_unix(1_800_000_100),
            finished_at: Timestamp::from_unix(1_800_000_101),
            provider: "p".into(),
            model: "m".into(),
            usage: None,
            sources: vec![],
            context_used: None,
            parent: None,
            new_conversation: false,
            question: None,
            archive_after_days: None,
        };
        let (_, a) = apply_turn(&mut state, &turn);
        assert_eq!(
            state.message(&a).unwrap().content,
            "<p>converted earlier</p>"
        );
        assert_eq!(state.message(&a).unwrap().title, "converted earlier");
        // And the conversion itself copes with the hostile nesting.
        let x = answer_xhtml(&answer);
        assert!(x.contains("deep"));
        wo_format::xhtml::check_fragment(&x).unwrap();
    }

    #[test]
    fn a_turn_appends_question_then_answer_and_counts_refs() {
        let mut state = State::new(Timestamp::from_unix(1_800_000_000));
        let t = wo_format::TruthEntry::new(
            "fact",
            Timestamp::from_unix(1_799_000_000),
            0.9,
            "<p>x</p>",
        );
        let tid = t.id.clone();
        state.truth.trust.push(t);
        let turn = CompletedTurn {
            username: "alec".into(),
            prompt: "Why <b>?".into(),
            answer: "Because **markdown**.\n<script>x</script>".into(),
            answer_xhtml: answer_xhtml("Because **markdown**.\n<script>x</script>"),
            sent_at: Timestamp::from_unix(1_800_000_100),
            finished_at: Timestamp::from_unix(1_800_000_100),
            provider: "local".into(),
            model: "smollm2".into(),
            usage: None,
            sources: vec![tid.clone()],
            context_used: None,
            parent: None,
            new_conversation: false,
            question: None,
            archive_after_days: None,
        };
        let (u, a) = apply_turn(&mut state, &turn);
        let ms = state.messages();
        assert_eq!(ms.len(), 2);
        assert_eq!(ms[0].id, u);
        assert_eq!(ms[1].id, a);
        assert_eq!(ms[0].content, "<p>Why &lt;b&gt;?</p>");
        assert_eq!(ms[1].content, "<p>Because <strong>markdown</strong>.</p>");
        assert_eq!(ms[1].parent.as_deref(), Some(u.as_str()));
        assert_eq!(ms[1].effective_role(), Role::Assistant);
        assert!(ms[1].timestamp > ms[0].timestamp);
        assert_eq!(state.truth.trust[0].refs, Some(1));
        // The same exchange again within the same second is kept, not
        // swallowed as a duplicate id.
        let again = CompletedTurn {
            parent: Some(a.clone()),
            ..turn.clone()
        };
        let (u2, a2) = apply_turn(&mut state, &again);
        assert_eq!(state.messages().len(), 4);
        assert_ne!(u2, u);
        assert_ne!(a2, a);
        let second_answer = state.message(&a2).unwrap();
        assert_eq!(second_answer.parent.as_deref(), Some(u2.as_str()));
        assert!(state.message(&u2).unwrap().timestamp < second_answer.timestamp);
        let order: Vec<&str> = state.messages().iter().map(|m| m.id.as_str()).collect();
        assert_eq!(order, [u.as_str(), a.as_str(), u2.as_str(), a2.as_str()]);
    }
}
