"""No Qt here (a test checks it): snapshots, wording, rules and the door to the job store."""
