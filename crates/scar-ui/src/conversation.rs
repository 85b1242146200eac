//! Conversations, kept in the settings: every answered question is a turn of the current
//! conversation, its earlier turns are shown above the answer, and past conversations are
//! listed to be reopened. The question panel rewrites a follow-up to stand alone from them.

use scar_answer::Turn;

use crate::{Conversation, Settings};

/// The turns of the conversation a follow-up continues.
pub(crate) fn current_turns(settings: &Settings) -> &[Turn] {
    settings
        .conversation
        .and_then(|n| settings.conversations.get(n))
        .map_or(&[], |conversation| conversation.turns.as_slice())
}

/// Adds `turn` to the current conversation (a new one when there is none); with `replace`, it
/// takes the place of a last turn that searched for the same question.
pub(crate) fn record_turn(settings: &mut Settings, turn: Turn, replace: bool) {
    let conversations = &mut settings.conversations;
    let n = match settings.conversation {
        Some(n) if n < conversations.len() => n,
        _ => {
            conversations.push(Conversation::default());
            conversations.len() - 1
        }
    };
    settings.conversation = Some(n);
    let turns = &mut conversations[n].turns;
    match turns.last_mut() {
        Some(last) if replace && last.standalone == turn.standalone => {
            last.answer = turn.answer;
        }
        _ => turns.push(turn),
    }
}

/// The earlier turns of the current conversation, above the answer.
pub(crate) fn turns_ui(ui: &mut egui::Ui, turns: &[Turn]) {
    if turns.is_empty() {
        return;
    }
    egui::CollapsingHeader::new(format!("Earlier in this conversation ({})", turns.len()))
        .default_open(false)
        .show(ui, |ui| {
            for turn in turns {
                ui.strong(&turn.question);
                ui.label(&turn.answer);
                ui.add_space(4.0);
            }
        });
}

/// The conversations list, in the library panel: the current one marked, each reopenable.
pub(crate) fn conversations_ui(ui: &mut egui::Ui, settings: &mut Settings) {
    if settings.conversations.is_empty() {
        return;
    }
    ui.separator();
    ui.horizontal(|ui| {
        ui.strong("Conversations");
        if ui
            .add_enabled(
                settings.conversation.is_some(),
                egui::Button::new("New").small(),
            )
            .on_hover_text("The next question starts a new conversation")
            .clicked()
        {
            settings.conversation = None;
        }
    });
    let mut reopen = None;
    for (n, conversation) in settings.conversations.iter().enumerate().rev() {
        let current = settings.conversation == Some(n);
        let label = format!("{} ({})", conversation.title(), conversation.turns.len());
        if ui
            .add(egui::Button::selectable(current, label).truncate())
            .on_hover_text("Continue this conversation")
            .clicked()
        {
            reopen = Some(n);
        }
    }
    if reopen.is_some() {
        settings.conversation = reopen;
    }
}
