"""Jobs and their states: the transition table, parameters, the queue that is the one writer
of status, the job graph, init images and the retry policy."""
