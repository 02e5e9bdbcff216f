"""The statistics, named and cited in each module: exact binomial bounds (certify), the metrics a QC owner reads
(metrics), calibration, the miss-rate detector (detector), the escape rate's live confidence sequence
(confidence_sequence), the drift tests (drift), the training signal's shares (training_signal). Pure (scipy)."""
