"""The dashboard: the web console at /dashboard where people sign up, configure projects,
chains and keys, and watch their credits; and where the operator runs the service.

Server-rendered Jinja2 pages with plain HTML forms (every page works without JavaScript),
a little JavaScript of our own for what must move without a reload (live usage over
server-sent events, copy buttons), and charts drawn as SVG on the server. Everything is
served by this process: no CDN, nothing fetched from elsewhere."""
