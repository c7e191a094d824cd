"""Many hosts in one view: read other machines' ``serve`` exporters over HTTP or SSH."""
