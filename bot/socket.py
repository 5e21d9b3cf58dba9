"""Socket Mode: the bot connects out to Slack over a WebSocket (no public URL needed).

Needs SLACK_APP_TOKEN (xapp-..., scope connections:write) besides SLACK_BOT_TOKEN.
"""

from __future__ import annotations

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler

from core.config import Settings, secret_value


def serve(settings: Settings, app: App) -> None:
    """Connect and handle events until interrupted (cli/serve.py builds the app and runs the sweep around it)."""
    SocketModeHandler(app, app_token=secret_value(settings.slack_app_token)).start()
