"""Feeds: following RSS, Atom and JSON Feed sources whose new entries become items."""
