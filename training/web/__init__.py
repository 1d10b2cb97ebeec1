"""The training app's web layer (pages, exports and the REST API): above every stage of the loop,
so it may read any of them; no stage imports from here."""
