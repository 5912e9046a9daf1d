//! raygate's permissions three ways, so that tests can hold them to each other: as README.md's
//! table documents them ("Permissions"), as the rendering grants them (its ClusterRole and
//! Role), and as `kubectl auth can-i --list` reports them for raygate's ServiceAccount.

use std::collections::BTreeSet;

use serde_json::Value;

/// One verb on one resource (`resource/subresource` for a subresource), maybe of one named
/// object, cluster-wide or in raygate's namespace.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// Granted in raygate's namespace only (by its Role), not cluster-wide.
    pub namespaced: bool,
    /// API group; empty for the core group.
    pub group: String,
    /// Resource, or `resource/subresource`.
    pub resource: String,
    /// The one object the grant is limited to, if any.
    pub name: Option<String>,
    /// The verb.
    pub verb: String,
}

/// What `kubectl auth can-i --list` shows of a grant: it says neither where a rule comes from
/// nor its scope.
pub type Listed = (String, String, Option<String>, String);

impl Grant {
    /// The grant as `kubectl auth can-i --list` lists it.
    pub fn listed(&self) -> Listed {
        (
            self.group.clone(),
            self.resource.clone(),
            self.name.clone(),
            self.verb.clone(),
        )
    }
}

/// The marker line above README.md's permissions table.
const TABLE_MARKER: &str = "<!-- permissions table: tests/src/rbac.rs reads it -->";

/// The items of a cell such as `` `get`, `list` `` (empty for `—` or nothing).
fn cell_items(cell: &str) -> Vec<String> {
    cell.split(',')
        .map(|item| item.trim().trim_matches('`').to_owned())
        .filter(|item| !item.is_empty() && item != "—")
        .collect()
}

/// The grants README.md's permissions table documents, one per verb, resource and name.
///
/// # Panics
/// When README.md has no such table or a row has too few cells.
pub fn documented(readme: &str) -> BTreeSet<Grant> {
    let table = readme
        .split_once(TABLE_MARKER)
        .unwrap_or_else(|| panic!("README.md has no line {TABLE_MARKER}"))
        .1;
    let mut grants = BTreeSet::new();
    // The header and its rule, then rows until the first line that is not one.
    for row in table
        .lines()
        .skip_while(|line| line.trim().is_empty())
        .skip(2)
        .take_while(|line| line.starts_with('|'))
    {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        assert!(cells.len() >= 5, "README.md permissions row {row:?}");
        let namespaced = cells[0] != "cluster";
        let group = match cells[1].trim_matches('`') {
            "core" => String::new(),
            group => group.to_owned(),
        };
        let rule = Rule {
            namespaced,
            groups: vec![group],
            resources: cell_items(cells[2]),
            names: cell_items(cells[3]),
            verbs: cell_items(cells[4]),
        };
        rule.expand_into(&mut grants);
    }
    grants
}

/// One RBAC rule, as a Role's or a README row's.
struct Rule {
    namespaced: bool,
    groups: Vec<String>,
    resources: Vec<String>,
    /// Empty: every object.
    names: Vec<String>,
    verbs: Vec<String>,
}

impl Rule {
    /// Adds one [`Grant`] per group, resource, name and verb.
    fn expand_into(self, grants: &mut BTreeSet<Grant>) {
        let names: Vec<Option<String>> = if self.names.is_empty() {
            vec![None]
        } else {
            self.names.into_iter().map(Some).collect()
        };
        for group in &self.groups {
            for resource in &self.resources {
                for name in &names {
                    for verb in &self.verbs {
                        grants.insert(Grant {
                            namespaced: self.namespaced,
                            group: group.clone(),
                            resource: resource.clone(),
                            name: name.clone(),
                            verb: verb.clone(),
                        });
                    }
                }
            }
        }
    }
}

/// The grants of a rendering's ClusterRoles and Roles.
pub fn rendered(objects: &[Value]) -> BTreeSet<Grant> {
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect()
    };
    let mut grants = BTreeSet::new();
    for object in objects {
        let namespaced = match object["kind"].as_str() {
            Some("ClusterRole") => false,
            Some("Role") => true,
            _ => continue,
        };
        for rule in object["rules"].as_array().into_iter().flatten() {
            Rule {
                namespaced,
                groups: strings(&rule["apiGroups"]),
                resources: strings(&rule["resources"]),
                names: strings(&rule["resourceNames"]),
                verbs: strings(&rule["verbs"]),
            }
            .expand_into(&mut grants);
        }
    }
    grants
}

/// The resource grants of `kubectl auth can-i --list` output (non-resource URLs are left out).
pub fn can_i_list(output: &str) -> BTreeSet<Listed> {
    let mut listed = BTreeSet::new();
    for line in output.lines().skip(1) {
        // A non-resource URL's row starts with blanks where the resource would be.
        if line.starts_with(char::is_whitespace) || line.trim().is_empty() {
            continue;
        }
        let Some((token, rest)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        // `rayjobs.ray.io/status` or `rayjobs/status.ray.io`: resource, group, subresource.
        let (head, group) = token.split_once('.').unwrap_or((token, ""));
        let (resource, group) = match group.split_once('/') {
            Some((group, sub)) => (format!("{head}/{sub}"), group.to_owned()),
            None => (head.to_owned(), group.to_owned()),
        };
        // Then three bracketed lists: non-resource URLs, resource names, verbs.
        let lists: Vec<Vec<String>> = rest
            .split('[')
            .skip(1)
            .map(|list| {
                list.split(']')
                    .next()
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            })
            .collect();
        let [_, names, verbs] = lists.as_slice() else {
            continue;
        };
        let names: Vec<Option<String>> = if names.is_empty() {
            vec![None]
        } else {
            names.iter().cloned().map(Some).collect()
        };
        for name in &names {
            for verb in verbs {
                listed.insert((group.clone(), resource.clone(), name.clone(), verb.clone()));
            }
        }
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn can_i_list_rows_are_read_with_their_groups_names_and_verbs() {
        let output = "\
Resources                                    Non-Resource URLs   Resource Names   Verbs
pods                                         []                  []               [get list]
rayjobs.ray.io/status                        []                  []               [patch]
mutatingwebhookconfigurations.admissionregistration.k8s.io   []   [raygate]   [get patch]
                                             [/api/*]            []               [get]
";
        let listed = can_i_list(output);
        let row = |group: &str, resource: &str, name: Option<&str>, verb: &str| {
            (
                group.to_owned(),
                resource.to_owned(),
                name.map(str::to_owned),
                verb.to_owned(),
            )
        };
        assert_eq!(
            listed,
            BTreeSet::from([
                row("", "pods", None, "get"),
                row("", "pods", None, "list"),
                row("ray.io", "rayjobs/status", None, "patch"),
                row(
                    "admissionregistration.k8s.io",
                    "mutatingwebhookconfigurations",
                    Some("raygate"),
                    "get"
                ),
                row(
                    "admissionregistration.k8s.io",
                    "mutatingwebhookconfigurations",
                    Some("raygate"),
                    "patch"
                ),
            ])
        );
    }

    #[test]
    fn the_readme_table_is_read_row_by_row() {
        let readme = format!(
            "text\n{TABLE_MARKER}\n\n| scope | API group | resources | names | verbs | why |\n\
             |---|---|---|---|---|---|\n\
             | cluster | `core` | `pods`, `services` | — | `get`, `patch` | Ray Pods |\n\
             | `raygate-system` | `coordination.k8s.io` | `leases` | `raygate` | `update` | leader |\n\nafter\n"
        );
        let grants = documented(&readme);
        assert_eq!(grants.len(), 5, "{grants:?}");
        assert!(grants.contains(&Grant {
            namespaced: true,
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            name: Some("raygate".into()),
            verb: "update".into(),
        }));
        assert!(grants.contains(&Grant {
            namespaced: false,
            group: String::new(),
            resource: "services".into(),
            name: None,
            verb: "patch".into(),
        }));
    }
}
