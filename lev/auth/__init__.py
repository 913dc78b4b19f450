"""Who is calling and what they may do: the principal, capabilities, folder scope and kb_only, token minting
(`policy`); the process's principal cache (`principal_cache`); accounts: sign-up, sign-in, browser sessions,
CSRF and the account API's token and activity operations (`accounts`); the password rule and the one password
change (`passwords`); an account's address verified by mail (`addresses`)."""
