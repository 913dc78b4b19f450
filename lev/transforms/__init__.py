"""AI outputs of an item: summary and key phrases, local or by a chat-completions provider (`service`),
with the stop words of the local key phrases (`stopwords`)."""
