"""Socket Mode: the bot connects out to Slack over a WebSocket (no public URL needed).

Needs SLACK_APP_TOKEN (xapp-..., scope connections:write) besides SLACK_BOT_TOKEN.
"""

from __future__ import annotations

from core.config import Settings, secret_value


def serve(settings: Settings) -> None:
    """Connect and handle events until interrupted."""
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    from bot.app import build_app, replay_event, require_slack_settings
    from bot.recovery import QuestionSweeper

    require_slack_settings(settings, "SLACK_APP_TOKEN", "SLACK_BOT_TOKEN")
    app = build_app(settings, socket_mode=True)
    with QuestionSweeper(settings, replay=lambda body: replay_event(app, body)):
        SocketModeHandler(app, app_token=secret_value(settings.slack_app_token)).start()
