"""The core every room uses, depending on nothing else of Lev's: the one error table and its wire shapes (`errors`) and
which failures are outages (`outages`), the settings read from the environment (`settings`), per-request facts
(`context`), the service clock (`clock`), the contract loader and the Connexion shim (`contract`), Connexion's app with
its per-operation parts built once (`connexion_app`), request-body parsing (`jsonguard`), the retry policy for outside
providers (`retry`), the MIME types an upload may have (`mimes`), the pages' security headers (`pagepolicy`), the
release and the files shipped inside the package (`packagedata`) and the one parser of the URLs people send (`weburl`),
text made fit for XML (`xmltext`), the text encodings a declared charset may name (`charsets`), validation errors in
words (`wording`), what a starting server says (`steps`) and a file's path as Lev keeps it (`sourcepath`)."""
