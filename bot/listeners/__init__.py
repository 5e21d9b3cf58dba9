"""The Bolt listeners decide; they never run the pipeline.

Events from bots never get here (bot/who_may_ask.py, Bolt middleware); who else may ask is
checked with that module's predicates: outsiders in `decide_*` (bot/decisions.py), guests and
bot users from users.info after the ack (carry_out.py).

A decision is carried out with a few fast steps: claim the message (one answer per Slack
message, even when Slack sends it twice or retries), record the question, show progress (👀 or
the agent view's status), enqueue a Celery task holding plain IDs. The answer is posted by the
worker.

One module per flow, each a function that bot/app.py registers, taking the shared `Listeners`
(common.py) first: mentions.py (`app_mention`) and messages.py (`message`: DMs and the agent
view) decide, and carry_out.py hands the decision to questions.py, uploads.py or notices.py;
agent_view.py (`assistant_thread_started`), app_home.py (`app_home_opened`), and the buttons:
feedback.py (the votes) and uploads.py (an admin's choice).
"""
