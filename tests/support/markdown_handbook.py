"""A handbook written the way GitHub-hosted company handbooks are: front matter, badges,
images, HTML comments, reference links, inline links whose text carries the fact, bare URLs
with "." and "%2C" inside, inline code, nested lists and a table."""

from __future__ import annotations

AMAZON = "https://www.amazon.com/s?k=standing+desk&crid=2X1M9&sprefix=standing+des%2Caps%2C136&sr=8-3"
HOLIDAYS = "https://kettlefern.example.com/people/holidays_2026.html?region=pt&v=1.2"

HANDBOOK = f"""---
title: Kettle & Fern People Handbook
sidebar_position: 2
tags:
  - people
---

[![Build](https://img.shields.io/github/actions/workflow/status/kettlefern/handbook/ci.yml?branch=main)](https://github.com/kettlefern/handbook/actions) [![License: CC BY 4.0](https://img.shields.io/badge/License-CC_BY_4.0-lightgrey.svg)][license]

![The team at the 2025 offsite](https://kettlefern.example.com/img/team.png "Offsite")

<!-- TODO(people-ops): the 2027 holidays are not approved yet: 14 local holidays -->

# Kettle & Fern People Handbook

## Time off

Everyone at Kettle & Fern observes [11 local holidays]({HOLIDAYS}) every year, on top of annual leave. \
Ask in [#people-ops][people] when a holiday falls on a weekend.

- Parental leave:
  - Primary caregivers get *16 weeks* fully paid.
  - Secondary caregivers get __4 weeks__; book them with `/timeoff parental` in Slack.
- Bereavement leave is 5 days.

## Home office

Buy a standing desk on [Amazon]({AMAZON}) and claim up to **USD 400** within 30 days. \
The full list lives at https://kettlefern.example.com/home-office/kit.v2.html?items=desk%2Cchair. \
Read the [equipment policy] before you order.

| Item | Budget (USD) |
| --- | --- |
| Desk | 400 |
| [Chair]({AMAZON}) | 250.50 |

Questions? Write to <people@kettlefern.example.com> or see <https://kettlefern.example.com/faq>.

[license]: https://creativecommons.org/licenses/by/4.0/
[people]: https://kettlefern.slack.com/archives/C0PEOPLE "People Ops channel"
[Equipment Policy]: <https://kettlefern.example.com/policies/equipment policy.pdf>
"""
