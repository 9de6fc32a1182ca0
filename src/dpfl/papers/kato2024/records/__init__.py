"""kato2024 Fig 13: records per user and silo of an allocation. Import-light (nothing here): a plot job depends on
this file (dpfl.codedeps)."""
