"""The pure core: answer extraction and normalisation, voting, stopping rules, the time budget. No I/O."""
