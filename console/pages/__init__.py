"""The console's pages, one module per page: each has its handlers and a `routes(console)`
naming who may reach them (console/web.py: Access). console/app.py puts them together."""
