# strip drops prose and examples and keeps every schema keyword; a
# properties map is walked without filtering its keys, since GitHub objects
# have fields named "description", "title" and "example".
def strip:
  if type == "object" then
    with_entries(
      if .key == "properties" and (.value | type) == "object" then .value |= map_values(strip)
      elif (.key == "description" or .key == "summary" or .key == "title") and (.value | type) == "string" then empty
      elif .key == "example" or .key == "examples" then empty
      else .value |= strip end)
  elif type == "array" then map(strip)
  else . end;
