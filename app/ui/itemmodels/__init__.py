"""Qt item models (job list, timeline tree, gallery) and the delegates that paint their cells."""
