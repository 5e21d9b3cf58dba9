"""The admin web console: review the action log, watch knowledge-base health, manage documents, sources and evaluators."""
