"""`python -m cli`: the `policybot` command, for the tests and scripts that run it with a given interpreter."""

from cli.main import run

run()
