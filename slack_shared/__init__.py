"""The Slack kit the worker and the Bolt listeners (bot/) share: the Web API client and Slack's
error codes, Block Kit messages, progress marks, the apology, who may read an answer, askers'
names (users.info), and the Slack bookkeeping a reply needs (claiming a message once)."""
