"""`lev sync`: a small client that keeps a local folder in a Lev folder through the REST API alone, importing
nothing of the server (it starts without the app): the command (`command`), one run and the watch (`run`), the
local folder and the memory between runs (`tree`), the REST calls (`client`)."""
