"""Tags: an item's labels, nested with `/`, case-insensitive per user; the operations every surface shares
(`service`), the names a surface accepts (`names`), and the tags an item's page suggests (`suggest`)."""
