"""What posts to Slack: the Web API client, Block Kit messages, progress marks, the apology, and
the Slack bookkeeping a reply needs. The worker posts with it; the Bolt listeners (bot/) too."""
