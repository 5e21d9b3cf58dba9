from policybot.cli import run

run()
