"""The schema registry's model: subjects, versions, schema formats and their compatibility rules."""
